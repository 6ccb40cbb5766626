package service

import (
	"context"

	"github.com/lovia-fleet/lovia/pkg/store"
)

// startReaper starts the store's Reaper, which removes what an ended run
// left (checkpoint, mailbox, control keys) once its record expired (every
// API instance runs one: reaping is idempotent).
func (s *Service) startReaper(ctx context.Context) {
	r, err := store.NewReaper(store.ReaperConfig{Store: s.api.cfg.Store, Logger: s.api.log})
	if err == nil {
		err = r.Start(ctx)
	}
	if err != nil {
		s.api.log.Warn("service: the retention reaper did not start", "err", err)
		return
	}
	s.reaper = r
}

func (s *Service) stopReaper(ctx context.Context) error {
	if s.reaper == nil {
		return nil
	}
	err := s.reaper.Stop(ctx)
	s.reaper = nil
	return err
}

// runNotFound is the NotFound of a run id the fleet does not know: never
// submitted, or ended longer ago than the fleet's retention age.
func runNotFound(runID string) error {
	e := notFound("run " + runID)
	e.Hint = "check the id: the fleet never saw it, or the run ended longer ago than the retention age (lovia worker --retention, 7 days by default) and expired; lovia runs list (GET /v1/runs) lists the runs the fleet knows"
	return e
}
