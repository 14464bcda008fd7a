package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
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
// is returned as it is (the same command sent twice).
//
// by is the admin's /prompt message (zero: none). That message handled
// again (its replica died before the update's done-mark) returns the
// version it set, active or not, and sets nothing: by then another admin
// may have set a newer one, which its text must not undo.
func (s *Prompts) Set(ctx context.Context, role, template string, by domain.MessageRef) (memory.Prompt, error) {
	p := memory.Prompt{Role: role, Template: template, Active: true}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		// Serializes concurrent /prompt of one role on the version number.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('prompt:' || $1, 0))`, role); err != nil {
			return err
		}
		if by != (domain.MessageRef{}) {
			err := tx.QueryRow(ctx, `SELECT p.prompt_template, p.version, p.is_active, p.updated_at
FROM system_prompt_sets s JOIN system_prompts p USING (role_name, version)
WHERE s.chat_id = $1 AND s.message_id = $2 AND s.role_name = $3`, by.Chat, by.ID, role).
				Scan(&p.Template, &p.Version, &p.Active, &p.UpdatedAt)
			if !errors.Is(err, pgx.ErrNoRows) {
				return err // nil: the message set it before
			}
		}
		err := tx.QueryRow(ctx, `SELECT version, updated_at FROM system_prompts
WHERE role_name = $1 AND is_active AND prompt_template = $2`, role, template).Scan(&p.Version, &p.UpdatedAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `UPDATE system_prompts SET is_active = false WHERE role_name = $1 AND is_active`, role); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `INSERT INTO system_prompts (role_name, prompt_template, version)
SELECT $1, $2, COALESCE(max(version), 0) + 1 FROM system_prompts WHERE role_name = $1
RETURNING version, updated_at`, role, template).Scan(&p.Version, &p.UpdatedAt); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if by == (domain.MessageRef{}) {
			return nil
		}
		// The unchanged text is recorded too: its message handled again
		// after another admin's set must find it, not set it anew.
		_, err = tx.Exec(ctx, `INSERT INTO system_prompt_sets (chat_id, message_id, role_name, version) VALUES ($1, $2, $3, $4)`,
			by.Chat, by.ID, role, p.Version)
		return err
	})
	if err != nil {
		return p, fmt.Errorf("set prompt %s: %w", role, err)
	}
	return p, nil
}
