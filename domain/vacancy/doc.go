// Package vacancy is the vacancy workflow: discover every new HH.ru vacancy
// of each saved search, judge it with the LLM against the user's profile,
// and deliver the relevant ones with Applied / Not interested buttons; then
// follow the person's applications (pipeline.go).
//
// The state machine is per (user, vacancy) match, because relevance depends
// on the user:
//
//	        fetch (filters passed)
//	               │
//	               ▼
//	NEW ──────► QUEUED ──────────────► IN_ARCHIVE      (HH 404: every open match of the vacancy)
//	 ▲             │ ╲───────────────► (deleted)       (ban word in description)
//	 │             │  ╲──────────────► NOT_SUITABLE    (LLM: not relevant; final)
//	 │             │   ╲
//	 │             ▼    ╲
//	 │         ANALYZED  ╲───────────► SKIPPED         (the MaxFailures-th LLM/HH error; no card)
//	 │             │ (card in the outbox)│
//	 │             ▼ (on delivery)       │
//	 │       SENT_TO_USER                │
//	 │         │      │                  │
//	 │         ▼      ▼                  │
//	 │     APPLIED  NOT_INTERESTED       │
//	 │         │ (the job seeker's pipeline: pipeline.go)
//	 │         ▼                         │
//	 │  INVITED · NO_ANSWER · OFFER · REJECTED
//	 └───────────────────────────────────┘ recovery within the window
//
// Every change goes through Transition (the table in status.go) and is
// one conditional UPDATE naming the old state, so a change someone else
// made first is a no-op, never a double transition. ANALYZED →
// SENT_TO_USER happens when Telegram accepts the card: the workflow's
// delivery hook for its outbox row (storage/vacancy_matches.go), checked against
// the table, makes it in the statement that marks the row sent.
//
// Nothing here talks to Telegram. A relevant match becomes ANALYZED in
// the same transaction that writes its card (the Notifier renders it) to
// the outbox, and that transaction releases the worker's claim: the
// outbox's senders deliver the card, retry failures, and drop it for a
// user who blocked the bot (the match then stays ANALYZED).
//
// The database is the queue: workers claim QUEUED matches newest-published
// first with FOR UPDATE SKIP LOCKED and a lease; a claim whose lease ran
// out (a replica killed mid-work) is simply claimable again. An ANALYZED
// match is never claimed: its card is in the outbox, written with it.
//
// A turn that ran and failed for the match (the LLM's error or invalid
// answer, HH's error for the vacancy) is a failure: retried later, and at
// Config.MaxFailures the match is SKIPPED. A turn given back unjudged for
// a cause outside the match (the LLM's breaker, refusal or rate limit, HH
// blocking us, a shutdown, a lost lease) is a wait: the match stays QUEUED
// however often it waits. Match.Failures and Match.Waits count them apart.
//
// A vacancy's detail (GET /vacancies/{id}) is fetched once however many
// users' matches point at it: the claim takes the vacancy's fetch lease,
// the detail is stored with the match's next transition (ending the
// lease), and the claim passes over matches whose vacancy is being
// fetched. While HH blocks us (captcha, forbidden, 429:
// the Source's breaker holds requests back), matches that need a detail
// stay QUEUED, untouched, and discovery skips its ticks; nothing turns
// SKIPPED for it. Discovery (discovery.go) pages a search newest first and
// counts vacancies this search has not seen, so nothing is missed however
// many arrive between runs.
//
// Storage: one port per store, each implemented by one storage type.
// Matches (service.go) is the matches through the status table and what
// feeds them: the vacancies' details, discovery's runs, first news, the
// rhythms and digests (storage.Matches: storage/vacancy_matches.go,
// vacancies.go, discovery.go, firstnews.go, vacancy_settings.go); Searches
// (service.go) the saved searches and the users' filters (storage.Searches:
// storage/searches.go, ban_words.go); Applications (pipeline.go) the
// applications and their cover letters (storage.Applications:
// storage/applications.go, cover_letters.go); Profiles (service.go) the
// users' profiles (storage.Users).
//
// Cover letters (letter.go, its prompt in letter_prompt.go) are a service
// of their own, Letters, over Applications and Matches:
// a press writes a pending letter, letter workers on any replica draft it
// and write it to the outbox with its end.
package vacancy
