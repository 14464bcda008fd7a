package hh

import (
	"os"
	"testing"
)

// Whatever HH (or a proxy in front of it) answers on a bad day, a vacancy
// decodes or is refused with an error; what decodes has a positive id, a
// publication time and salary bounds that are amounts, not what an
// overflowing conversion makes of 1e300.
func FuzzDecodeVacancy(f *testing.F) {
	for _, name := range []string{"testdata/vacancy_detail.json", "testdata/not_found.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"id": "1", "published_at": "2026-11-27T10:00:00+0300", "salary": {"from": 1e300, "to": -5, "currency": "RUR"}}`,
		`{"id": "-1"}`, `{"id": "1", "published_at": "yesterday"}`, `{"id": 1}`, `{"archived": true}`, `[]`, `null`, ``,
		`{"id": "1", "published_at": "2026-11-27T10:00:00Z", "snippet": {"requirement": "<highlighttext>Go</highlighttext>"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decodeVacancy(body)
		if err != nil {
			return
		}
		if v.ID <= 0 || v.PublishedAt.IsZero() {
			t.Fatalf("%q decoded without an id or a time: %+v", body, v)
		}
		if v.Salary.From < 0 || v.Salary.To < 0 || v.Salary.From > maxSalary || v.Salary.To > maxSalary {
			t.Fatalf("%q decoded with the salary %d–%d", body, v.Salary.From, v.Salary.To)
		}
	})
}
