package resume

import (
	"context"

	"switchboard/domain"
)

// Module is the résumé readers: drafts are rows, so another replica
// finishes what a dead one claimed (domain.Module).
func (s *Service) Module() domain.Module {
	return domain.Module{
		Name:  "résumé drafts",
		Loops: []domain.Loop{func(ctx context.Context, _ domain.Listen) { s.Run(ctx) }},
	}
}
