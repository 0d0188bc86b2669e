# The portal image: Python, the package, the front-end assets from the npm registry, and
# helm and the vcluster CLI built from the Go module proxy at build time (nothing is
# downloaded when the portal runs: it works on an air-gapped cluster).
FROM node:20-slim AS assets
WORKDIR /assets
COPY scripts/fetch-assets.sh scripts/fetch-assets.sh
RUN mkdir -p static && PORTAL_CACHE=/tmp/cache bash scripts/fetch-assets.sh

# The kubernetes backend installs vClusters with the vcluster CLI, which runs helm.
# Versions: the vcluster CLI as tools/vcluster/go.mod pins it (verified against its
# go.sum; one dependency is missing from the public checksum database), helm as
# scripts/build-tools.sh pins it.
FROM golang:1.26 AS tools
ARG HELM_VERSION=v3.22.0
WORKDIR /src
COPY tools/vcluster tools/vcluster
RUN cd tools/vcluster \
    && version="$(grep -oE 'github.com/loft-sh/vcluster v[0-9][^ ]*' go.mod | head -1 | cut -d' ' -f2)" \
    && CGO_ENABLED=0 GONOSUMDB=github.com/loft-sh go build -trimpath \
       -ldflags "-s -w -X main.version=${version#v}" \
       -o /out/vcluster github.com/loft-sh/vcluster/cmd/vclusterctl \
    && CGO_ENABLED=0 GOBIN=/out go install -trimpath \
       -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
       "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=tools /out/vcluster /out/helm /usr/local/bin/
WORKDIR /app
COPY pyproject.toml requirements.lock README.md alembic.ini ./
COPY app app
COPY migrations migrations
COPY templates templates
COPY static static
COPY --from=assets /assets/static/vendor static/vendor
RUN pip install --no-cache-dir --require-hashes -r requirements.lock \
    && pip install --no-cache-dir --no-deps . \
    && useradd --system --uid 10001 --create-home --home-dir /home/portal portal
USER portal
# The vcluster CLI and helm keep caches and settings under HOME; the CLI's version check
# calls the internet, so it is off. (The Helm chart points HOME at its writable /tmp,
# because the root filesystem is read-only there.)
ENV HOME=/home/portal VCLUSTER_SKIP_VERSION_CHECK=true
EXPOSE 8000
# `serve` waits for the database, runs `alembic upgrade head`, then starts uvicorn.
CMD ["gpu-portal", "serve", "--host", "0.0.0.0", "--port", "8000"]
