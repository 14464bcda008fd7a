// Package resume makes a vacancy profile from a résumé the user sends the
// bot in private chat: a PDF, DOCX or plain-text file is downloaded from
// Telegram, its text extracted (extract.go), the LLM condenses it to the
// profile's form (prompt.go), and the user confirms, edits or cancels the
// draft before it replaces their profile.
//
// The file and its text are never stored: a profile_drafts row holds
// Telegram's file id while the draft is read and the condensed draft once
// it is made; the text lives in the worker's memory for one attempt.
//
//	document (private chat)
//	     │ Accept: the row and the "reading…" reply, one transaction
//	     ▼
//	  READING ──claim (lease, token)──► worker: download, extract, LLM
//	     │  ▲                             │
//	     │  └── released: shutdown, a passing failure (retried later), or
//	     │      the model away (tried again, no attempt spent; the user told
//	     │      once that the draft comes when it is back)
//	     │
//	     ├──draft made (its message with the buttons)──► READY ◄──┐
//	     │                                                 │  ▲    │
//	     └──the file refused, attempts spent, or the model away past
//	        ModelWait────────────────────────────► FAILED (user told; holds
//	                                                       │  │    │  only its message)
//	                                              Edit ────┘  │    │
//	                                                 ▼        │    │
//	                                              EDITING ────┘ corrected text
//	READY, EDITING ──Use this profile──► (deleted; users.profile set, same statement)
//	READY, EDITING ──Cancel, or DraftTTL without a change──► (deleted)
//
// Every change is one conditional statement naming the state (and, for a
// button, the draft's id and revision), so a second press, a press on an
// older message of the draft, or a worker whose claim lapsed changes
// nothing. A newer document replaces the user's draft in whatever state;
// a FAILED draft waits for that or for the prune job, so that its
// document's update run again after a crash finds it and says nothing.
package resume
