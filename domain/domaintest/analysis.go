package domaintest

import (
	"fmt"
	"strings"

	"switchboard/domain"
	"switchboard/domain/analysis"
)

// BoardText spells an analysis run's board as the tests render it:
// progress, the page, the page's proposals (ProposalList), the counters
// (pending/approved/rejected) and " ?" while it asks to approve all.
func BoardText(rv analysis.Review) string {
	r := rv.Run
	confirm := ""
	if r.ReviewConfirm {
		confirm = " ?"
	}
	return fmt.Sprintf("%d/%d p%d/%d [%s] %d/%d/%d%s", r.BatchesDone, r.Batches, rv.Page+1, rv.Pages(),
		ProposalList(rv.Proposals), r.ProposalsPending, r.ProposalsApproved, r.ProposalsRejected, confirm)
}

// ProposalList spells proposals as a board lists them: by ordinal
// (+ approved, - rejected) and title.
func ProposalList(ps []analysis.Proposal) string {
	var out []string
	for _, p := range ps {
		mark := ""
		switch p.Decision {
		case analysis.Approved:
			mark = "+"
		case analysis.Rejected:
			mark = "-"
		}
		out = append(out, fmt.Sprintf("#%d%s %s", p.Ordinal, mark, p.Title))
	}
	return strings.Join(out, ", ")
}

// BoardButtons are a board page's decision buttons, one row per proposal,
// whose data name the proposal.
func BoardButtons(rv analysis.Review) [][]domain.Button {
	var out [][]domain.Button
	for _, p := range rv.Proposals {
		out = append(out, []domain.Button{{Text: fmt.Sprintf("✅ %d", p.Ordinal), Data: fmt.Sprintf("pa:%d", p.ID)}})
	}
	return out
}
