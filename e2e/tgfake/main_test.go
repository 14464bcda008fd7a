package tgfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// apiResponse is a decoded Bot API response plus its HTTP status.
type apiResponse struct {
	Status      int             `json:"-"`
	RetryHeader string          `json:"-"`
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// client is a plain HTTP client per test, so that idle connections are
// closed when the test ends and goleak stays quiet.
func client(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func do(t testing.TB, req *http.Request) apiResponse {
	t.Helper()
	out, err := doRaw(client(t), req)
	require.NoError(t, err)
	return out
}

// doRaw performs a request without touching t, so it is safe in goroutines.
func doRaw(c *http.Client, req *http.Request) (apiResponse, error) {
	resp, err := c.Do(req)
	if err != nil {
		return apiResponse{}, fmt.Errorf("do request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return apiResponse{}, fmt.Errorf("read body: %w", err)
	}
	var out apiResponse
	if err := json.Unmarshal(body, &out); err != nil {
		return apiResponse{}, fmt.Errorf("decode %q: %w", body, err)
	}
	out.Status = resp.StatusCode
	out.RetryHeader = resp.Header.Get("Retry-After")
	return out, nil
}

func methodURL(srv *Server, method string) string {
	return srv.URL() + "/bot" + srv.Token() + "/" + method
}

// callJSON posts params as a JSON body, the way telebot does.
func callJSON(t testing.TB, srv *Server, method string, params map[string]any) apiResponse {
	t.Helper()
	out, err := callJSONRaw(client(t), srv, method, params)
	require.NoError(t, err)
	return out
}

func callJSONRaw(c *http.Client, srv *Server, method string, params map[string]any) (apiResponse, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return apiResponse{}, fmt.Errorf("encode params: %w", err)
	}
	req, err := http.NewRequest(http.MethodPost, methodURL(srv, method), bytes.NewReader(body))
	if err != nil {
		return apiResponse{}, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	return doRaw(c, req)
}

func callForm(t testing.TB, srv *Server, method string, form url.Values) apiResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, methodURL(srv, method), strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(t, req)
}

func callQuery(t testing.TB, srv *Server, method string, query url.Values) apiResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, methodURL(srv, method)+"?"+query.Encode(), nil)
	require.NoError(t, err)
	return do(t, req)
}

// callMultipart posts fields and one file part.
func callMultipart(t testing.TB, srv *Server, method string, fields map[string]string, fileField, fileName string, data []byte) apiResponse {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range fields {
		require.NoError(t, w.WriteField(k, v))
	}
	if fileField != "" {
		part, err := w.CreateFormFile(fileField, fileName)
		require.NoError(t, err)
		_, err = part.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	req, err := http.NewRequest(http.MethodPost, methodURL(srv, method), &buf)
	require.NoError(t, err)
	req.Header.Set("Content-Type", w.FormDataContentType())
	return do(t, req)
}

func requireOK(t testing.TB, r apiResponse) {
	t.Helper()
	require.Truef(t, r.OK, "expected success, got %d %s", r.ErrorCode, r.Description)
	require.Equal(t, http.StatusOK, r.Status)
}

func requireError(t testing.TB, r apiResponse, code int, description string) {
	t.Helper()
	require.False(t, r.OK, "expected an error, got result %s", r.Result)
	require.Equal(t, code, r.ErrorCode)
	require.Equal(t, code, r.Status, "HTTP status mirrors error_code")
	require.Equal(t, description, r.Description)
}

func decodeResult[T any](t testing.TB, r apiResponse) T {
	t.Helper()
	requireOK(t, r)
	var v T
	require.NoError(t, json.Unmarshal(r.Result, &v), "result: %s", r.Result)
	return v
}

// startedUser registers a user who has written to the bot, so the bot may
// message them.
func startedUser(t testing.TB, srv *Server, id int64) *Person {
	t.Helper()
	p := srv.User(id, "Alice", "en")
	p.SendText(p.ID(), "/start")
	return p
}

func keyboardJSON(t testing.TB, rows ...[]map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"inline_keyboard": rows})
	require.NoError(t, err)
	return string(b)
}

func button(text, data string) map[string]any {
	return map[string]any{"text": text, "callback_data": data}
}
