package config

import (
	"log/slog"

	"switchboard/hh"
)

// HHToken is the application token every request to HH carries, as
// configured: HH_APP_TOKEN as it is; HH_CLIENT_ID and HH_CLIENT_SECRET
// through client_credentials, one token for every replica kept in store
// (PostgreSQL); neither, nil: anonymous requests. The token is never logged.
func (cfg Config) HHToken(store hh.TokenStore, log *slog.Logger) (hh.TokenSource, error) {
	switch {
	case cfg.HHAppToken != "":
		log.Info("hh: requests carry the application token HH_APP_TOKEN")
		return hh.StaticToken(cfg.HHAppToken), nil
	case cfg.HHClientID != "":
		t, err := hh.NewAppToken(hh.AppTokenConfig{
			URL: cfg.HHOAuthURL, ClientID: cfg.HHClientID, ClientSecret: cfg.HHClientSecret,
			UserAgent: cfg.HHUserAgent, Store: store, Log: log,
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
