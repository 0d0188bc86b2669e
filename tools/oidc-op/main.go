// An OpenID provider for the test suite that behaves as many real ones do and the Python
// mock does not: opaque access tokens checked by token introspection (RFC 7662), which
// answers "active" only to a client the token was issued to, and, for one client, JWT
// access tokens. It is zitadel/oidc's example provider (its in-memory storage, login page
// and users) with three clients: "web" and "api" (opaque access tokens, secret "secret")
// and "jwt-web" (JWT access tokens, the same secret).
//
// PORT sets the port; REDIRECT_URI the allowed redirect URIs, comma-separated.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// jwtClient is a client whose access tokens are JWTs.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

// clients hands out jwtClient for the client ids in jwt.
type clients struct {
	*storage.Storage
	jwt map[string]bool
}

func (s clients) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	client, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil || !s.jwt[id] {
		return client, err
	}
	return jwtClient{client}, nil
}

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "9998"
	}
	redirects := strings.Split(os.Getenv("REDIRECT_URI"), ",")
	issuer := fmt.Sprintf("http://localhost:%s/", port)
	storage.RegisterClients(
		storage.WebClient("web", "secret", redirects...),
		storage.WebClient("api", "secret", redirects...),
		storage.WebClient("jwt-web", "secret", redirects...),
	)
	store := clients{storage.NewStorage(storage.NewUserStore(issuer)), map[string]bool{"jwt-web": true}}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, store, logger, false)
	server := &http.Server{Addr: "127.0.0.1:" + port, Handler: router}
	if err := server.ListenAndServe(); err != http.ErrServerClosed {
		logger.Error("the provider stopped", "error", err)
		os.Exit(1)
	}
}
