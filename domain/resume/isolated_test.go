package resume_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/resume"
)

// inProcess is a Run that serves the request here, as the child would.
func inProcess(_ context.Context, stdin []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := resume.ServeExtract(bytes.NewReader(stdin), &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// What the child reads comes back as Extract would have returned it: the
// text, or the same refusal, each of which the user is told apart.
func TestIsolatedGivesWhatExtractGives(t *testing.T) {
	t.Parallel()
	x := resume.Isolated{Run: inProcess}
	ctx := context.Background()
	for _, tc := range []struct {
		file   string
		format resume.Format
		pages  int
	}{
		{"resume.pdf", resume.PDF, 20}, {"resume.docx", resume.DOCX, 20}, {"resume.txt", resume.Text, 20},
		{"scanned.pdf", resume.PDF, 20}, {"resume.pdf", resume.PDF, 1}, {"resume.txt", resume.PDF, 20},
	} {
		data := readTestdata(t, tc.file)
		want, wantErr := resume.Extract(data, tc.format, tc.pages)
		got, err := x.Extract(ctx, data, tc.format, tc.pages)
		require.Equal(t, want, got, tc.file)
		for _, kind := range []error{resume.ErrNoText, resume.ErrUnreadable, resume.ErrTooManyPages} {
			require.Equal(t, errors.Is(wantErr, kind), errors.Is(err, kind), "%s: %v against %v", tc.file, err, wantErr)
		}
		var wantPages, gotPages *resume.TooManyPagesError
		if errors.As(wantErr, &wantPages) {
			require.ErrorAs(t, err, &gotPages)
			require.Equal(t, *wantPages, *gotPages, "the PDF's length and the limit, for the reply")
		}
	}
	_, err := x.Extract(ctx, readTestdata(t, "resume.pdf"), resume.PDF, 1)
	require.ErrorIs(t, err, resume.ErrTooManyPages, "resume.pdf has two pages")
}

// A child killed at its deadline or crashed is the file's fault, told as
// unreadable; a child that could not start is not, and the draft is tried
// again later.
func TestIsolatedChildFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := readTestdata(t, "cyclic.pdf")
	for _, fault := range []error{resume.ErrChildTimeout, resume.ErrChildCrashed} {
		x := resume.Isolated{Run: func(context.Context, []byte) ([]byte, error) { return nil, fault }}
		_, err := x.Extract(ctx, data, resume.PDF, 20)
		require.ErrorIs(t, err, resume.ErrUnreadable)
		require.ErrorIs(t, err, fault)
	}
	x := resume.Isolated{Run: func(context.Context, []byte) ([]byte, error) { return nil, errors.New("fork: no memory") }}
	_, err := x.Extract(ctx, data, resume.PDF, 20)
	require.Error(t, err)
	require.NotErrorIs(t, err, resume.ErrUnreadable)

	x = resume.Isolated{Run: func(context.Context, []byte) ([]byte, error) { return []byte("fatal error: out of"), nil }}
	_, err = x.Extract(ctx, data, resume.PDF, 20)
	require.ErrorIs(t, err, resume.ErrUnreadable, "an answer cut short is the child's crash")
}
