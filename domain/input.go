package domain

// InputError is a user's input a workflow turns down. Key is the locale key
// of the reply and Args its template data: the limit the input broke
// ("Max", "Min", "MaxLen") and the part of the input at fault ("Arg"),
// whole, for the bot to cut to its reply's width. Every workflow returns
// this one type, so the bot turns all of them into replies in one place.
type InputError struct {
	Key  string
	Args map[string]any
}

func (e *InputError) Error() string { return "invalid input: " + e.Key }

// Arg is the part of the input at fault ("" if the key names none).
func (e *InputError) Arg() string {
	s, _ := e.Args["Arg"].(string)
	return s
}
