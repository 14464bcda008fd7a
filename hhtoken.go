package main

import (
	"context"
	"log/slog"

	"switchboard/hh"
	"switchboard/storage"
)

// hhTokenSource is the application token every request to HH carries, as
// configured: HH_APP_TOKEN as it is; HH_CLIENT_ID and HH_CLIENT_SECRET
// through client_credentials, one token for every replica kept in
// PostgreSQL; neither, nil: anonymous requests. The token is never logged.
func hhTokenSource(cfg Config, st *storage.Store, log *slog.Logger) (hh.TokenSource, error) {
	switch {
	case cfg.HHAppToken != "":
		log.Info("hh: requests carry the application token HH_APP_TOKEN")
		return hh.StaticToken(cfg.HHAppToken), nil
	case cfg.HHClientID != "":
		t, err := hh.NewAppToken(hh.AppTokenConfig{
			URL: cfg.HHOAuthURL, ClientID: cfg.HHClientID, ClientSecret: cfg.HHClientSecret,
			UserAgent: cfg.HHUserAgent, Store: hhTokenStore{st}, Log: log,
		})
		if err != nil {
			return nil, err
		}
		log.Info("hh: requests carry an application token obtained with HH_CLIENT_ID", "oauth_url", cfg.HHOAuthURL)
		return t, nil
	}
	log.Info("hh: requests are anonymous (no HH_CLIENT_ID or HH_APP_TOKEN)")
	return nil, nil
}

// hhTokenStore adapts storage to hh.TokenStore: hh does not import
// storage, and storage does not know hh's types.
type hhTokenStore struct{ st *storage.Store }

func (s hhTokenStore) AppToken(ctx context.Context, clientID string, renew func(context.Context, *hh.StoredToken) (*hh.NewToken, error)) (hh.StoredToken, error) {
	t, err := s.st.HHAppToken(ctx, clientID, func(ctx context.Context, stored *storage.HHToken) (*storage.NewHHToken, error) {
		var in *hh.StoredToken
		if stored != nil {
			in = &hh.StoredToken{Token: stored.Token, Age: stored.Age, Expires: stored.Expires, TTL: stored.TTL, Refused: stored.Refused}
		}
		fresh, err := renew(ctx, in)
		if err != nil || fresh == nil {
			return nil, err
		}
		return &storage.NewHHToken{Token: fresh.Token, Lifetime: fresh.Lifetime}, nil
	})
	return hh.StoredToken{Token: t.Token, Age: t.Age, Expires: t.Expires, TTL: t.TTL, Refused: t.Refused}, err
}

func (s hhTokenStore) RefuseAppToken(ctx context.Context, clientID, token string) (bool, error) {
	return s.st.RefuseHHAppToken(ctx, clientID, token)
}
