package hhtest_test

import (
	"io"
	"net/http"
	"testing"

	"switchboard/hh/hhtest"
)

// BenchmarkSearch measures a full page over HTTP, so that benchmarks of
// clients built on the fake know how much of their time is the fake's.
func BenchmarkSearch(b *testing.B) {
	srv := hhtest.New(hhtest.WithVacancies(hhtest.Generate(10_000, hhtest.GenOptions{Seed: 1})...))
	defer srv.Close()
	client := srv.Client()
	req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/vacancies?per_page=100&text=go&page=3", nil)
	req.Header.Set("User-Agent", testUA)
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func BenchmarkGenerate(b *testing.B) {
	for b.Loop() {
		hhtest.Generate(1000, hhtest.GenOptions{Seed: 1})
	}
}
