package memory

import (
	"time"

	"switchboard/domain"
)

// Module is the memory chat's orchestrator, which LISTENs for runs, and its
// reaper of stalled runs, every reap (domain.Module).
func (s *Service) Module(reap time.Duration) domain.Module {
	return domain.Module{
		Name:  "memory chat",
		Jobs:  []domain.Job{{Name: "memory-reaper", Every: reap, Run: domain.Uncounted(s.Reap)}},
		Loops: []domain.Loop{s.Run},
	}
}
