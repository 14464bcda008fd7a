package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/memory"
)

// Prompts is the system prompts aggregate: each role's versions of its
// template, one of them active.
type Prompts struct{ *db }

// Prompts is the store of the system prompts.
func (s *Store) Prompts() *Prompts { return &Prompts{s.db} }

var _ memory.Prompts = (*Prompts)(nil)

// Active returns a role's active prompt or domain.ErrNotFound.
func (s *Prompts) Active(ctx context.Context, role string) (memory.Prompt, error) {
	p := memory.Prompt{Role: role}
	err := s.pool.QueryRow(ctx, `SELECT prompt_template, version, is_active, updated_at FROM system_prompts
WHERE role_name = $1 AND is_active`, role).Scan(&p.Template, &p.Version, &p.Active, &p.UpdatedAt)
	if err != nil {
		return p, fmt.Errorf("prompt %s: %w", role, interpretError(err))
	}
	return p, nil
}

// ActiveAll returns every role's active prompt template.
func (s *Prompts) ActiveAll(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT role_name, prompt_template FROM system_prompts WHERE is_active`)
	if err != nil {
		return nil, fmt.Errorf("active prompts: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var role, tmpl string
		if err := rows.Scan(&role, &tmpl); err != nil {
			return nil, fmt.Errorf("active prompts: %w", err)
		}
		out[role] = tmpl
	}
	return out, rows.Err()
}

// Set stores a new active version of a role's prompt, keeping the
// old ones inactive. The active version's own text is no new version: it
// is returned as it is (the same /prompt run again, its update's replica
// having died before the done-mark, or sent twice).
func (s *Prompts) Set(ctx context.Context, role, template string) (memory.Prompt, error) {
	p := memory.Prompt{Role: role, Template: template, Active: true}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		// Serializes concurrent /prompt of one role on the version number.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('prompt:' || $1, 0))`, role); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT version, updated_at FROM system_prompts
WHERE role_name = $1 AND is_active AND prompt_template = $2`, role, template).Scan(&p.Version, &p.UpdatedAt)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err // nil: the active version already says this
		}
		if _, err := tx.Exec(ctx, `UPDATE system_prompts SET is_active = false WHERE role_name = $1 AND is_active`, role); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO system_prompts (role_name, prompt_template, version)
SELECT $1, $2, COALESCE(max(version), 0) + 1 FROM system_prompts WHERE role_name = $1
RETURNING version, updated_at`, role, template).Scan(&p.Version, &p.UpdatedAt)
	})
	if err != nil {
		return p, fmt.Errorf("set prompt %s: %w", role, err)
	}
	return p, nil
}
