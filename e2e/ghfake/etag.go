package ghfake

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"switchboard/internal/testkit"
)

// etagOf is a weak ETag over what the answer says and who asked, since
// GitHub varies its answers by Authorization.
func etagOf(login string, body any) string {
	b := testkit.JSON("ghfake", body)
	sum := sha256.Sum256(append([]byte(strings.ToLower(login)+"\x00"), b...))
	return `W/"` + hex.EncodeToString(sum[:16]) + `"`
}

// etagMatches applies If-None-Match's weak comparison: a list of tags or
// "*", each matching whether or not it carries W/.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == want {
			return true
		}
	}
	return false
}
