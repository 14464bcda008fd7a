package storage

import "context"

// RatingRank evaluates pick's rank (ratingRank over a record like
// ratingRecord's) for a master whose ratings within the window have these
// stars, with the parameters pick passes.
func (s *Store) RatingRank(ctx context.Context, stars []int) (float64, error) {
	var rank float64
	args := append([]any{stars}, rankArgs()[1:]...)
	err := s.pool.QueryRow(ctx, `SELECT (`+ratingRank("$2", "$3", "$4")+`)::float8
FROM (SELECT count(*) AS n, avg(s::smallint) AS avg FROM unnest($1::int[]) s) rec`, args...).Scan(&rank)
	return rank, err
}
