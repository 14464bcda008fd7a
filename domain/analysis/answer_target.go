package analysis

// NewAnswerTarget returns an empty value of the type the executor decodes
// the LLM's proposals into, so the LLM port's tests can decode real-world
// answer shapes into it (and run its Validate) without a whole run.
func NewAnswerTarget() any { return new(Answer) }
