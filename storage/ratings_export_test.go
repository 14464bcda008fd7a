package storage

import "context"

// RatingRank evaluates pick's rank (ratingRank, as masterRank applies it)
// for a master whose ratings within the window have these stars, with the
// parameters pick passes.
func (s *Store) RatingRank(ctx context.Context, stars []int) (float64, error) {
	var rank float64
	args := append([]any{stars}, rankArgs()[1:]...)
	err := s.pool.QueryRow(ctx, `SELECT (`+ratingRank("count(*)", "avg(s::smallint)", "$2", "$3", "$4")+`)::float8
FROM unnest($1::int[]) s`, args...).Scan(&rank)
	return rank, err
}
