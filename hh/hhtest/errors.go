package hhtest

import (
	"encoding/json"
	"strconv"
)

// HH's error envelope (hhru/api:docs/errors.md): {"errors":[{"type":..,"value":..}]}.
// Clients are told to read only errors[].type/value, so the fake keeps the
// envelope minimal except where the published examples show more.

type errorItem struct {
	Type  string `json:"type"`
	Value string `json:"value,omitempty"`
}

type errorBody struct {
	Errors []errorItem `json:"errors"`
}

type badArgument struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// badArgumentBody carries the legacy keys HH still sends with bad_argument
// errors (quoted in hhru/api issues #69 and #98 for the depth limit). They
// are "kept for backward compatibility", so a client must not depend on
// them, but it must not choke on them either.
type badArgumentBody struct {
	Errors       []errorItem   `json:"errors"`
	BadArguments []badArgument `json:"bad_arguments"`
	Description  string        `json:"description"`
	BadArgument  string        `json:"bad_argument"`
}

// DepthLimitDescription is HH's description (errors' legacy "description"
// key) of a page/per_page pair that reaches past the first 2000 results.
const DepthLimitDescription = "you can't look up more than 2000 items in the list"

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("hhtest: " + err.Error()) // only static shapes are marshalled
	}
	return b
}

func notFoundBody() []byte {
	return mustJSON(errorBody{Errors: []errorItem{{Type: "not_found"}}})
}

func badUserAgentBody(value string) []byte {
	return mustJSON(errorBody{Errors: []errorItem{{Type: "bad_user_agent", Value: value}}})
}

func serviceUnavailableBody() []byte {
	return mustJSON(errorBody{Errors: []errorItem{{Type: "service_unavailable"}}})
}

// badArgumentErr is returned by query parsing; params lists the offending
// parameter names, each producing one errors[] item as HH does.
type badArgumentErr struct {
	params      []string
	description string
}

func (e *badArgumentErr) Error() string { return e.description }

func (e *badArgumentErr) body() []byte {
	joined := ""
	items := make([]errorItem, 0, len(e.params))
	for i, p := range e.params {
		items = append(items, errorItem{Type: "bad_argument", Value: p})
		if i > 0 {
			joined += ", "
		}
		joined += p
	}
	return mustJSON(badArgumentBody{
		Errors:       items,
		BadArguments: []badArgument{{Name: joined, Description: e.description}},
		Description:  e.description,
		BadArgument:  joined,
	})
}

func badArg(description string, params ...string) *badArgumentErr {
	return &badArgumentErr{params: params, description: description}
}

// gatewayBody imitates the HTML page a proxy in front of HH answers with;
// HH warns that 5xx bodies may not be JSON.
func gatewayBody(status int, text string) []byte {
	return []byte("<html>\r\n<head><title>" + strconv.Itoa(status) + " " + text + "</title></head>\r\n<body>\r\n<center><h1>" +
		strconv.Itoa(status) + " " + text + "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
}
