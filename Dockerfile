# The portal image: Python, the package, htmx from the npm registry at build time.
FROM node:20-slim AS assets
WORKDIR /assets
COPY scripts/fetch-assets.sh scripts/fetch-assets.sh
RUN mkdir -p static && PORTAL_CACHE=/tmp/cache bash scripts/fetch-assets.sh

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# The kubernetes backend installs vClusters with the vcluster CLI (>= 0.21).
ARG VCLUSTER_VERSION=v0.26.1
ADD --chmod=755 https://github.com/loft-sh/vcluster/releases/download/${VCLUSTER_VERSION}/vcluster-linux-amd64 /usr/local/bin/vcluster
WORKDIR /app
COPY pyproject.toml requirements.lock README.md alembic.ini ./
COPY app app
COPY migrations migrations
COPY templates templates
COPY static static
COPY --from=assets /assets/static/vendor static/vendor
RUN pip install --no-cache-dir --require-hashes -r requirements.lock \
    && pip install --no-cache-dir --no-deps . \
    && useradd --system --uid 10001 portal
USER portal
EXPOSE 8000
# `serve` waits for the database, runs `alembic upgrade head`, then starts uvicorn.
CMD ["gpu-portal", "serve", "--host", "0.0.0.0", "--port", "8000"]
