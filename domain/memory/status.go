package memory

import (
	"errors"

	"switchboard/domain"
)

// Status is where a pipeline run is.
type Status string

// The statuses of pipeline_runs.
const (
	New        Status = "NEW"        // written at intake
	Analyzing  Status = "ANALYZING"  // captured by the analyzer
	Analyzed   Status = "ANALYZED"   // analysis_result stored
	Assembling Status = "ASSEMBLING" // captured by draft builder + assembler
	Ready      Status = "READY"      // final_context_payload stored
	Responding Status = "RESPONDING" // captured by the final responder
	Completed  Status = "COMPLETED"  // final_answer stored (final)
	Failed     Status = "FAILED"     // error_message stored (final)
)

// Statuses lists every status in pipeline order.
var Statuses = []Status{New, Analyzing, Analyzed, Assembling, Ready, Responding, Completed, Failed}

// transitions is the process document's table. FAILED is entered from a
// stage at work (its error, or the reaper giving up); NEW, ANALYZED and
// READY only wait for the next capture, and nothing fails there.
var transitions = domain.NewTransitions(ErrIllegalTransition, "", map[Status][]Status{
	New:        {Analyzing},                // analyzer captures
	Analyzing:  {Analyzed, New, Failed},    // analysis stored; reaper returns it; error
	Analyzed:   {Assembling},               // assembler captures
	Assembling: {Ready, Analyzed, Failed},  // context stored; reaper returns it; error
	Ready:      {Responding},               // responder captures
	Responding: {Completed, Ready, Failed}, // answer stored; reaper returns it; error
})

// capturing maps a stage's working status to the status it was captured
// from, where the reaper returns it.
var capturing = map[Status]Status{Analyzing: New, Assembling: Analyzed, Responding: Ready}

// Before is the status a stage at work returns to when it is given back
// (a stop, a result not saved, the reaper); false for a status that is no
// stage.
func Before(stage Status) (Status, bool) {
	s, ok := capturing[stage]
	return s, ok
}

// ErrIllegalTransition is returned for a change the table does not allow.
var ErrIllegalTransition = errors.New("illegal pipeline status transition")

// CanTransition reports whether the table allows from → to.
func CanTransition(from, to Status) bool { return transitions.Can(from, to) }

func checkTransition(from, to Status) error { return transitions.Check(from, to) }

// Final reports whether nothing leaves s.
func (s Status) Final() bool { return transitions.Final(s) }
