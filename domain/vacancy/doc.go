// Package vacancy is the vacancy workflow: discover every new HH.ru vacancy
// of each saved search, judge it with the LLM against the user's profile,
// and deliver the relevant ones with Applied / Not interested buttons.
//
// The state machine is per (user, vacancy) match, because relevance depends
// on the user:
//
//	        fetch (filters passed)
//	               │
//	               ▼
//	NEW ──────► QUEUED ──────────────► IN_ARCHIVE      (HH 404)
//	 ▲             │ ╲───────────────► (deleted)       (ban word in description)
//	 │             │  ╲──────────────► NOT_SUITABLE    (LLM: not relevant; final)
//	 │             │   ╲
//	 │             ▼    ╲
//	 │         ANALYZED  ╲───────────► SKIPPED         (LLM/HH error, breaker, shutdown)
//	 │             │                     │
//	 │             ▼                     │
//	 │       SENT_TO_USER                │
//	 │         │      │                  │
//	 │         ▼      ▼                  │
//	 │     APPLIED  NOT_INTERESTED       │
//	 └───────────────────────────────────┘ recovery within the window
//
// Every change goes through Transition (the table in status.go) and is
// one conditional UPDATE naming the old state, so a change someone else
// made first is a no-op, never a double transition.
//
// The database is the queue: workers claim QUEUED (and undelivered
// ANALYZED) matches newest-published first with FOR UPDATE SKIP LOCKED and
// a lease; a claim whose lease ran out (a replica killed mid-work) is simply
// claimable again. Discovery (discovery.go) pages a search newest first and
// counts vacancies this search has not seen, so nothing is missed however
// many arrive between runs.
package vacancy
