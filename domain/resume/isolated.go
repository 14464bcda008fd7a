package resume

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Extractor reads a file's text: Extract, run where it cannot hang or
// crash the bot. Deps.Extractor is one; nil runs Extract in the process,
// as tests do.
type Extractor interface {
	Extract(ctx context.Context, data []byte, f Format, maxPages int) (string, error)
}

// inProcess is the Extractor of a Service given none.
type inProcess struct{}

func (inProcess) Extract(_ context.Context, data []byte, f Format, maxPages int) (string, error) {
	return Extract(data, f, maxPages)
}

// Run is one isolated run (isolate.Child.Run in the binary): stdin to the
// child started with ServeExtract, its stdout back. An error wrapping
// ErrChildTimeout or ErrChildCrashed is the file's fault; any other is the
// machine's, tried again later.
type Run func(ctx context.Context, stdin []byte) ([]byte, error)

// What Run's errors are matched against (isolate.ErrTimeout and
// *isolate.CrashError, mapped by the binary).
var (
	ErrChildTimeout = errors.New("reading took too long")
	ErrChildCrashed = errors.New("reading crashed")
)

// Isolated is an Extractor that reads each file in a child process (Run):
// a PDF whose page tree holds itself loops for ever inside the PDF library,
// and a loop cannot be stopped in the process; a child is killed at its
// deadline, and the file is told to the user as unreadable.
type Isolated struct{ Run Run }

// extractRequest is the child's stdin's first line; the file follows it.
type extractRequest struct {
	Format   Format `json:"format"`
	MaxPages int    `json:"max_pages"`
}

// extractResult is the child's stdout.
type extractResult struct {
	Text string `json:"text,omitempty"`
	// Refused is "no_text", "unreadable" or "pages" (Pages, Max), with
	// Detail for the log.
	Refused string `json:"refused,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Pages   int    `json:"pages,omitempty"`
	Max     int    `json:"max,omitempty"`
}

// Extract implements Extractor.
func (x Isolated) Extract(ctx context.Context, data []byte, f Format, maxPages int) (string, error) {
	head, err := json.Marshal(extractRequest{Format: f, MaxPages: maxPages})
	if err != nil {
		return "", fmt.Errorf("isolated extract: %w", err)
	}
	out, err := x.Run(ctx, append(append(head, '\n'), data...))
	switch {
	case errors.Is(err, ErrChildTimeout), errors.Is(err, ErrChildCrashed):
		return "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	case err != nil:
		return "", fmt.Errorf("isolated extract: %w", err)
	}
	var res extractResult
	if err := json.Unmarshal(out, &res); err != nil {
		return "", fmt.Errorf("%w: %w: answer %w", ErrUnreadable, ErrChildCrashed, err)
	}
	switch res.Refused {
	case "":
		return res.Text, nil
	case "no_text":
		return "", ErrNoText
	case "pages":
		return "", &TooManyPagesError{Pages: res.Pages, Max: res.Max}
	default:
		return "", fmt.Errorf("%w: %s", ErrUnreadable, res.Detail)
	}
}

// ServeExtract is the child's side: it reads a request and a file from in,
// runs Extract and writes the result to out. Its error is only about in or
// out; the file's faults are in the result.
func ServeExtract(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("serve extract: request: %w", err)
	}
	var req extractRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return fmt.Errorf("serve extract: request: %w", err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("serve extract: file: %w", err)
	}
	var res extractResult
	text, err := Extract(data, req.Format, req.MaxPages)
	var pages *TooManyPagesError
	switch {
	case err == nil:
		res.Text = text
	case errors.As(err, &pages):
		res.Refused, res.Pages, res.Max = "pages", pages.Pages, pages.Max
	case errors.Is(err, ErrNoText):
		res.Refused, res.Detail = "no_text", err.Error()
	default:
		res.Refused, res.Detail = "unreadable", err.Error()
	}
	if err := json.NewEncoder(out).Encode(res); err != nil {
		return fmt.Errorf("serve extract: answer: %w", err)
	}
	return nil
}
