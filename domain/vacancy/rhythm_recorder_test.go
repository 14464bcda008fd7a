package vacancy_test

import (
	"fmt"
	"time"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// Digest renders a digest page as one line per vacancy.
func (r *recorder) Digest(d vacancy.Digest) []domain.Message {
	text := fmt.Sprintf("digest %d: %d", d.ID, d.Total)
	for _, it := range d.Items {
		text += fmt.Sprintf("\n%d %s %d", it.MatchID, it.Vacancy.Title, it.Score)
	}
	return []domain.Message{{ChatID: d.UserID, Kind: domain.KindDigest, Ref: d.ID, Text: text}}
}

// Zone is Moscow's for everyone: the tests place their clocks there.
func (r *recorder) Zone(domain.User) *time.Location {
	loc, err := time.LoadLocation("Europe/Moscow")
	if err != nil {
		panic(err)
	}
	return loc
}
