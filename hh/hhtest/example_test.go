package hhtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"

	"switchboard/hh/hhtest"
)

func Example() {
	srv := hhtest.New(hhtest.WithVacancies(hhtest.Generate(150, hhtest.GenOptions{Seed: 1})...))
	defer srv.Close()

	fetch := func() (found int, firstName string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/vacancies?per_page=100&order_by=publication_time", nil)
		req.Header.Set("HH-User-Agent", "switchboard/1.0 (dev@example.com)")
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var page struct {
			Found int `json:"found"`
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			panic(err)
		}
		return page.Found, page.Items[0].Name
	}

	found, _ := fetch()
	fmt.Println("found:", found)

	srv.Publish(hhtest.Vacancy{Name: "Go-разработчик (Senior)", Experience: hhtest.Between3And6})
	found, first := fetch()
	fmt.Println("found:", found, "newest:", first)
	fmt.Println("search calls:", srv.SearchCalls())
	// Output:
	// found: 150
	// found: 151 newest: Go-разработчик (Senior)
	// search calls: 2
}
