package analysis

import (
	"context"

	"switchboard/domain"
)

// Module is the analysis runs' host (Serve): it fails runs whose executor
// died and hosts the executors /run_start launches; on stop they fail
// their runs as interrupted (domain.Module).
func (s *Service) Module() domain.Module {
	return domain.Module{
		Name:  "analysis runs",
		Loops: []domain.Loop{func(ctx context.Context, _ domain.Listen) { s.Serve(ctx) }},
	}
}
