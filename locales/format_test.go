package locales

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNumberGroupsDigitsAsTheReaderDoes(t *testing.T) {
	assert.Equal(t, "250,000", Number("en", 250000))
	assert.Equal(t, "250\u00a0000", Number("ru", 250000))
	assert.Equal(t, "1\u00a0234\u00a0567", Number("uk", 1234567))
	assert.Equal(t, "999", Number("ru", 999))
	assert.Equal(t, "-1,500", Number("de", -1500), "an unsupported language reads as English")
}

func TestDecimalUsesTheReadersPoint(t *testing.T) {
	assert.Equal(t, "4.7", Decimal("en", 14.0/3))
	assert.Equal(t, "4,7", Decimal("ru", 14.0/3))
	assert.Equal(t, "5,0", Decimal("uk", 5))
	assert.Equal(t, "3.5", Decimal("de", 3.5), "an unsupported language reads as English")
}

func TestMoneyUsesTheCurrencySign(t *testing.T) {
	assert.Equal(t, "250,000\u00a0₽", Money("en", 250000, "RUR"))
	assert.Equal(t, "250\u00a0000\u00a0₽", Money("ru", 250000, "RUR"))
	assert.Equal(t, "$3,000", Money("en", 3000, "USD"))
	assert.Equal(t, "3\u00a0000\u00a0$", Money("ru", 3000, "usd"))
	assert.Equal(t, "10\u00a0000\u00a0XYZ", Money("uk", 10000, "XYZ"))
	assert.Equal(t, "10,000", Money("en", 10000, ""))
}

func TestDurationNeverLooksLikeGo(t *testing.T) {
	cases := []struct {
		lang string
		d    time.Duration
		want string
	}{
		{"en", 5*time.Minute + 58*time.Second, "5\u00a0min 58\u00a0s"},
		{"ru", 5*time.Minute + 58*time.Second, "5\u00a0мин 58\u00a0с"},
		{"uk", 2*time.Hour + 5*time.Minute + 30*time.Second, "2\u00a0год 5\u00a0хв"},
		{"ru", 2 * time.Hour, "2\u00a0ч"},
		{"ru", 2*time.Hour + 30*time.Second, "2\u00a0ч"},
		{"en", 49 * time.Hour, "2\u00a0d 1\u00a0h"},
		{"ru", time.Millisecond, "меньше секунды"},
		{"uk", 0, "менше секунди"},
		{"en", 1499 * time.Millisecond, "1\u00a0s"},
		{"en", -90 * time.Second, "1\u00a0min 30\u00a0s"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Duration(c.lang, c.d), "%s %v", c.lang, c.d)
	}
}

func TestTimeTagCarriesTheMomentItSays(t *testing.T) {
	msk := LangZone("ru")
	at := time.Date(2026, 11, 26, 4, 7, 0, 0, time.UTC)
	got := string(TimeTag("ru", at, msk, at))
	assert.Equal(t, `<tg-time unix="1795666020" format="dt">`+Time("ru", at, msk, at)+`</tg-time>`, got)
	assert.Contains(t, got, "07:07 (Москва)", "the text stays in the reader's zone, its name inside the entity")

	// A date's moment is that day's noon where it was written: the same
	// day for a client twelve hours either side.
	kyiv := LangZone("uk")
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, kyiv)
	tag := string(DateTag("uk", day, at))
	assert.Equal(t, `<tg-time unix="`+fmt.Sprint(time.Date(2026, 11, 27, 12, 0, 0, 0, kyiv).Unix())+`" format="d">27 лист.</tg-time>`, tag)

	assert.Equal(t, `<tg-time unix="0" format="t">a &lt;b&gt; &amp; c</tg-time>`, string(Stamp("a <b> & c", time.Unix(0, 0), "t")),
		"the text is escaped: it is written inside HTML")
}
