package hhtest

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// DefaultFirstID is the id of the oldest generated vacancy when GenOptions
// does not set one; HH's current ids are nine-digit numbers.
const DefaultFirstID = 100_000_000

// DefaultNewest is the published_at of the newest generated vacancy when
// GenOptions does not set one. It is fixed (not time.Now) so that generated
// catalogues, and therefore test expectations, do not drift.
var DefaultNewest = time.Date(2025, time.June, 2, 12, 0, 0, 0, zoneFor(3))

// GenOptions tunes Generate. The zero value is usable.
type GenOptions struct {
	// Seed makes the output reproducible: equal options, equal vacancies.
	Seed int64
	// FirstID is the id of the oldest vacancy; ids then grow by one.
	// Zero means DefaultFirstID.
	FirstID int64
	// Newest is the publication time of the newest vacancy; older ones go
	// back in random gaps of up to a few minutes, sometimes zero so that
	// equal published_at values (ordered by id) occur. Zero means
	// DefaultNewest.
	Newest time.Time
	// TitleWords and DescriptionWords are planted, one word per vacancy, in
	// every InjectEvery-th vacancy (indexes 0, k, 2k... of the result): the
	// j-th planted vacancy gets words[j % len(words)], appended to its name
	// and added as a list item of its description. Use it to seed ban words
	// or keywords whose positions the test knows.
	TitleWords       []string
	DescriptionWords []string
	// InjectEvery is the planting period; values <= 1 plant in every vacancy.
	InjectEvery int
}

// Generate returns n realistic vacancies, oldest first: ids
// FirstID..FirstID+n-1 and non-decreasing publication times ending at
// Newest, so a newer vacancy always has a larger id, as on HH.
func Generate(n int, opts GenOptions) []Vacancy {
	if n <= 0 {
		return nil
	}
	opts = opts.withDefaults()
	g := newGenerator(opts)
	times := make([]time.Time, n)
	t := opts.Newest
	for i := n - 1; i >= 0; i-- {
		times[i] = t
		t = t.Add(-g.gap())
	}
	out := make([]Vacancy, n)
	for i := range n {
		out[i] = g.vacancy(opts.FirstID+int64(i), times[i])
	}
	return out
}

func (o GenOptions) withDefaults() GenOptions {
	if o.FirstID == 0 {
		o.FirstID = DefaultFirstID
	}
	if o.Newest.IsZero() {
		o.Newest = DefaultNewest
	}
	return o
}

type generator struct {
	r    *rand.Rand
	opts GenOptions
	n    int // vacancies produced so far; drives word planting
}

func newGenerator(opts GenOptions) *generator {
	// Two PCG words from one seed; the constant only decorrelates them.
	seed := uint64(opts.Seed)
	return &generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), opts: opts}
}

// gap is the distance between two consecutive publications.
func (g *generator) gap() time.Duration {
	if g.r.IntN(10) == 0 {
		return 0
	}
	return time.Duration(30+g.r.IntN(11*60)) * time.Second
}

type weighted[T any] struct {
	v T
	w int
}

func pick[T any](r *rand.Rand, items []weighted[T]) T {
	total := 0
	for _, it := range items {
		total += it.w
	}
	n := r.IntN(total)
	for _, it := range items {
		if n < it.w {
			return it.v
		}
		n -= it.w
	}
	return items[len(items)-1].v
}

func one[T any](r *rand.Rand, items []T) T { return items[r.IntN(len(items))] }

// some returns k distinct elements of items in random order.
func some[T any](r *rand.Rand, items []T, k int) []T {
	k = min(k, len(items))
	out := make([]T, 0, k)
	for _, i := range r.Perm(len(items))[:k] {
		out = append(out, items[i])
	}
	return out
}

// category groups titles with the skills and texts that fit them, so that a
// "Go-разработчик" does not ask for 1С.
type category struct {
	titles  []string
	skills  []string
	reqs    []string
	resps   []string
	salary  [2]int // monthly RUR range of the lower bound
	itGrade bool   // whether grade suffixes like "(Senior)" make sense
}

var categories = []weighted[*category]{
	{&category{
		titles: []string{"Go-разработчик", "Golang-разработчик", "Senior Backend Engineer (Go)", "Backend-разработчик (Golang)",
			"Разработчик Go", "Ведущий Go-разработчик", "Middle Go Developer", "Тимлид команды разработки (Go)",
			"Golang Developer / Разработчик Golang", "Старший backend-разработчик Go/Python", "Программист Go"},
		skills: []string{"Go", "Golang", "PostgreSQL", "Redis", "Kafka", "gRPC", "Docker", "Kubernetes", "REST API", "Git",
			"Linux", "Микросервисная архитектура", "ClickHouse", "RabbitMQ", "SQL", "Prometheus"},
		reqs: []string{"Опыт коммерческой разработки на Go от 2 лет.", "Уверенное знание PostgreSQL и умение оптимизировать запросы.",
			"Понимание принципов построения микросервисной архитектуры.", "Опыт работы с Kafka или RabbitMQ.",
			"Знание Docker, опыт работы с Kubernetes будет плюсом.", "Умение писать тесты и читать чужой код.",
			"Понимание модели памяти Go, горутин и каналов."},
		resps: []string{"Разработка и поддержка высоконагруженных микросервисов на Go.", "Проектирование API (REST, gRPC).",
			"Участие в code review и архитектурных обсуждениях.", "Оптимизация производительности сервисов.",
			"Взаимодействие с командами аналитики и QA.", "Перенос legacy-кода с PHP на Go."},
		salary: [2]int{150_000, 450_000}, itGrade: true,
	}, 35},
	{&category{
		titles: []string{"Инженер DevOps", "DevOps-инженер", "SRE-инженер", "Senior DevOps Engineer", "Системный инженер (DevOps)"},
		skills: []string{"Kubernetes", "Terraform", "Ansible", "CI/CD", "GitLab", "Prometheus", "Grafana", "Linux", "Docker", "Bash", "Helm"},
		reqs: []string{"Опыт администрирования Linux от 3 лет.", "Опыт построения CI/CD в GitLab.", "Знание Kubernetes и Helm.",
			"Опыт работы с Terraform и Ansible.", "Умение писать скрипты на Bash, Python или Go."},
		resps: []string{"Поддержка и развитие инфраструктуры в Kubernetes.", "Настройка мониторинга и алертинга.",
			"Автоматизация развёртывания сервисов.", "Участие в дежурствах и разборе инцидентов."},
		salary: [2]int{150_000, 400_000}, itGrade: true,
	}, 15},
	{&category{
		titles: []string{"Python-разработчик", "Backend-разработчик (Python)", "Senior Python Developer", "Разработчик Python/Django"},
		skills: []string{"Python", "Django", "FastAPI", "PostgreSQL", "Celery", "Redis", "Docker", "Git", "SQL"},
		reqs: []string{"Опыт разработки на Python от 2 лет.", "Знание Django или FastAPI.", "Опыт работы с PostgreSQL.",
			"Понимание асинхронного программирования."},
		resps:  []string{"Разработка backend-сервисов на Python.", "Интеграция с внешними API.", "Написание автотестов."},
		salary: [2]int{120_000, 380_000}, itGrade: true,
	}, 10},
	{&category{
		titles: []string{"Java-разработчик", "Senior Java Developer", "Разработчик Java/Kotlin"},
		skills: []string{"Java", "Kotlin", "Spring Framework", "Hibernate", "PostgreSQL", "Kafka", "Maven", "Git"},
		reqs:   []string{"Опыт разработки на Java от 3 лет.", "Знание Spring Boot.", "Опыт работы с реляционными СУБД."},
		resps:  []string{"Разработка банковских сервисов на Java.", "Сопровождение интеграций с Kafka."},
		salary: [2]int{150_000, 420_000}, itGrade: true,
	}, 8},
	{&category{
		titles: []string{"Frontend-разработчик (React)", "Frontend Developer (Vue.js)", "Верстальщик", "Fullstack-разработчик (Go + React)"},
		skills: []string{"JavaScript", "TypeScript", "React", "Vue.js", "HTML5", "CSS3", "Git", "Webpack"},
		reqs: []string{"Опыт разработки на React или Vue от 2 лет.", "Знание TypeScript.",
			"Умение верстать адаптивные интерфейсы."},
		resps:  []string{"Разработка пользовательских интерфейсов.", "Взаимодействие с дизайнерами и backend-командой."},
		salary: [2]int{100_000, 350_000}, itGrade: true,
	}, 8},
	{&category{
		titles: []string{"QA-инженер", "Инженер по автоматизации тестирования (Go)", "Тестировщик ПО", "QA Automation Engineer"},
		skills: []string{"Тестирование", "Автоматизированное тестирование", "Postman", "SQL", "Jira", "Go", "Python"},
		reqs:   []string{"Опыт ручного и автоматизированного тестирования.", "Умение составлять тест-кейсы.", "Знание SQL."},
		resps:  []string{"Тестирование новых фич и регресс.", "Разработка автотестов.", "Ведение тестовой документации."},
		salary: [2]int{80_000, 250_000}, itGrade: true,
	}, 6},
	{&category{
		titles: []string{"Системный аналитик", "Аналитик данных", "Бизнес-аналитик", "Data Engineer"},
		skills: []string{"SQL", "BPMN", "UML", "Python", "Jira", "Confluence", "Анализ данных", "ClickHouse"},
		reqs:   []string{"Опыт работы системным аналитиком от 2 лет.", "Уверенное знание SQL.", "Умение описывать требования."},
		resps:  []string{"Сбор и формализация требований.", "Подготовка ТЗ для разработки.", "Построение отчётности."},
		salary: [2]int{100_000, 300_000}, itGrade: true,
	}, 6},
	{&category{
		titles: []string{"Секретарь", "Офис-менеджер", "Бухгалтер", "Менеджер по продажам", "Специалист службы поддержки",
			"Оператор call-центра", "Водитель-экспедитор", "Кладовщик"},
		skills: []string{"Деловая переписка", "Работа с оргтехникой", "1С: Бухгалтерия", "Грамотная речь",
			"Пользователь ПК", "Прием посетителей", "Первичный документооборот", "Активные продажи"},
		reqs: []string{"Высшее образование.", "Знание делопроизводства, документооборота.", "Коммуникативные навыки.",
			"Опыт работы с 1С.", "Грамотная речь, уверенный пользователь ПК."},
		resps: []string{"Документооборот (регистрация, отправка, контроль исполнения писем).", "Приём и распределение звонков.",
			"Работа с клиентами по телефону.", "Ведение первичной документации."},
		salary: [2]int{40_000, 110_000},
	}, 12},
}

var grades = []weighted[string]{{"", 70}, {" (Junior)", 5}, {" (Middle)", 10}, {" (Senior)", 10}, {" (Middle+)", 5}}

var employers = []Employer{
	{ID: "1455", Name: "HeadHunter", Trusted: true, HasLogo: true},
	{ID: "3127456", Name: "ООО «Ромашка»", Trusted: false},
	{ID: "4821900", Name: "АО «Цифровые решения»", Trusted: true, HasLogo: true},
	{ID: "5530112", Name: "Финтех Лаб", Trusted: true, HasLogo: true},
	{ID: "1187345", Name: `ООО "Вектор"`, Trusted: true},
	{ID: "9904411", Name: "ИП Иванов Иван Иванович", Trusted: false},
	{ID: "2740018", Name: "ГК «Северный ветер»", Trusted: true, HasLogo: true},
	{ID: "6612097", Name: "Маркетплейс «Корзинка»", Trusted: true, HasLogo: true},
	{ID: "3301554", Name: "Банк «Восход» (АО)", Trusted: true, HasLogo: true},
	{ID: "7788120", Name: "Acme Software", Trusted: true, HasLogo: true},
	{ID: "8023367", Name: "DataFlow Systems", Trusted: true},
	{ID: "4410986", Name: "ООО «Логистика Плюс»", Trusted: false},
	{ID: "5092273", Name: "Облачные системы", Trusted: true, HasLogo: true},
	{ID: "6158830", Name: "Студия «Пиксель»", Trusted: false},
}

var blurbs = []string{
	"аккредитованная IT-компания, разрабатываем сервисы для миллионов пользователей.",
	"развиваем финтех-продукты и платёжную инфраструктуру.",
	"крупный федеральный ритейлер с собственной IT-командой.",
	"быстрорастущий стартап в сфере логистики.",
	"российский разработчик ПО для бизнеса &quot;под ключ&quot;.",
	"команда продукта, которым пользуются более 10&nbsp;млн человек.",
}

var conditions = []string{
	"Официальное оформление по ТК РФ с первого дня.", "Гибридный формат работы.", "ДМС со стоматологией.",
	"Компенсация обучения и конференций.", "Современная техника на выбор.", "Удалённая работа из любой точки России.",
	"Белая зарплата, премии по итогам квартала.", "Спорт &amp; корпоративные мероприятия.",
}

var streets = []string{"ул. Льва Толстого", "Ленинградский проспект", "Тверская улица", "Невский проспект",
	"ул. Академика Королёва", "Пресненская набережная", "Большая Семёновская улица", "Кутузовский проспект"}

var areaWeights = []weighted[string]{
	{AreaMoscow, 40}, {AreaSPb, 18}, {AreaRussia, 8}, {"3", 6}, {"4", 5}, {"66", 5}, {"78", 8}, {"88", 10},
}

func (g *generator) vacancy(id int64, at time.Time) Vacancy {
	r := g.r
	cat := pick(r, categories)
	name := one(r, cat.titles)
	grade := ""
	if cat.itGrade && !strings.Contains(name, "Senior") && !strings.Contains(name, "Middle") {
		grade = pick(r, grades)
		name += grade
	}

	v := Vacancy{
		ID:       strconv.FormatInt(id, 10),
		Name:     name,
		Employer: one(r, employers),
	}
	v.Area.ID = pick(r, areaWeights)
	info := areas[v.Area.ID]
	v.Area.Name = info.name

	v.Experience = g.experience(grade)
	v.Schedule = pick(r, []weighted[string]{{FullDay, 45}, {Remote, 30}, {Flexible, 15}, {Shift, 10}})
	if v.Area.ID == AreaRussia {
		// Country-wide postings are in practice remote ones.
		v.Schedule = Remote
	}
	v.Employment = pick(r, []weighted[string]{{FullEmployment, 85}, {PartEmployment, 7}, {ProjectEmployment, 6}, {Probation, 2}})
	v.Salary = g.salary(cat)

	v.PublishedAt = at.In(zoneFor(info.offset))
	v.CreatedAt = v.PublishedAt
	if r.IntN(5) == 0 {
		// Re-published vacancies keep their original creation time.
		v.CreatedAt = v.PublishedAt.Add(-time.Duration(1+r.IntN(72)) * time.Hour)
	}

	reqs := some(r, cat.reqs, 2+r.IntN(2))
	resps := some(r, cat.resps, 2+r.IntN(2))
	if r.IntN(30) != 0 {
		v.Requirement = strings.Join(reqs[:2], " ")
	}
	if r.IntN(30) != 0 {
		v.Responsibility = strings.Join(resps[:2], " ")
	}
	if r.IntN(10) != 0 {
		v.KeySkills = some(r, cat.skills, 3+r.IntN(6))
	} else {
		v.KeySkills = []string{}
	}
	if v.Area.ID != AreaRussia && v.Schedule != Remote && r.IntN(2) == 0 {
		v.Address = &Address{
			City:     info.name,
			Street:   one(r, streets),
			Building: strconv.Itoa(1+r.IntN(60)) + one(r, []string{"", "", "с2", "к1", "с10"}),
			Lat:      round6(info.lat + (r.Float64()-0.5)/5),
			Lng:      round6(info.lng + (r.Float64()-0.5)/5),
		}
	}
	v.ResponseLetterRequired = r.IntN(7) == 0
	v.HasTest = r.IntN(20) == 0
	v.Responses = r.IntN(300)

	if w := g.plant(g.opts.TitleWords); w != "" {
		v.Name += " " + w
	}
	planted := g.plant(g.opts.DescriptionWords)
	v.Description = g.description(v, reqs, resps, planted)
	g.n++
	return v
}

// plant returns the word to plant into the current vacancy, or "".
func (g *generator) plant(words []string) string {
	if len(words) == 0 {
		return ""
	}
	every := max(g.opts.InjectEvery, 1)
	if g.n%every != 0 {
		return ""
	}
	return words[(g.n/every)%len(words)]
}

func (g *generator) experience(grade string) string {
	switch grade {
	case " (Junior)":
		return pick(g.r, []weighted[string]{{NoExperience, 50}, {Between1And3, 50}})
	case " (Senior)":
		return pick(g.r, []weighted[string]{{Between3And6, 60}, {MoreThan6, 40}})
	}
	return pick(g.r, []weighted[string]{{NoExperience, 10}, {Between1And3, 35}, {Between3And6, 40}, {MoreThan6, 15}})
}

// salary covers every shape HH publishes: none, only from, only to, both;
// gross true, false or unknown; RUR mostly, sometimes USD or EUR.
func (g *generator) salary(cat *category) *Salary {
	r := g.r
	if r.IntN(100) < 35 {
		return nil
	}
	cur := pick(r, []weighted[string]{{"RUR", 85}, {"USD", 10}, {"EUR", 5}})
	rate, step := 1.0, 5000
	if cur != "RUR" {
		rate, step = currencyRates[cur], 100
	}
	lo := float64(cat.salary[0] + r.IntN(cat.salary[1]-cat.salary[0]+1))
	from := roundTo(lo/rate, step)
	to := roundTo(lo*(1.2+r.Float64()*0.4)/rate, step)
	s := &Salary{Currency: cur}
	switch pick(r, []weighted[int]{{0, 45}, {1, 35}, {2, 20}}) {
	case 0:
		s.From, s.To = &from, &to
	case 1:
		s.From = &from
	default:
		s.To = &to
	}
	switch r.IntN(10) {
	case 0: // gross unknown
	case 1, 2, 3, 4:
		t := true
		s.Gross = &t
	default:
		f := false
		s.Gross = &f
	}
	return s
}

func (g *generator) description(v Vacancy, reqs, resps []string, planted string) string {
	r := g.r
	var b strings.Builder
	b.WriteString("<p><strong>")
	b.WriteString(htmlEscape(v.Employer.Name))
	b.WriteString("</strong> — ")
	b.WriteString(one(r, blurbs))
	b.WriteString("</p><p><strong>Обязанности:</strong></p><ul>")
	for _, s := range resps {
		b.WriteString("<li>" + htmlEscape(s) + "</li>")
	}
	b.WriteString("</ul><p><strong>Требования:</strong></p><ul>")
	for _, s := range reqs {
		b.WriteString("<li>" + htmlEscape(s) + "</li>")
	}
	if planted != "" {
		b.WriteString("<li>" + htmlEscape(planted) + "</li>")
	}
	b.WriteString("</ul>")
	if len(v.KeySkills) > 0 && r.IntN(2) == 0 {
		b.WriteString("<p><strong>Будет плюсом:</strong> <em>" + htmlEscape(v.KeySkills[len(v.KeySkills)-1]) + "</em></p>")
	}
	b.WriteString("<p><strong>Условия:</strong></p><ul>")
	for _, s := range some(r, conditions, 2+r.IntN(3)) {
		b.WriteString("<li>" + s + "</li>")
	}
	b.WriteString("</ul>")
	return b.String()
}

func roundTo(x float64, step int) int {
	return int(math.Round(x/float64(step))) * step
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// HH renders Moscow time (+0300); older data, like the published examples,
// carries +0400, which the generator uses for Samara to keep both in play.
var (
	msk  = time.FixedZone("MSK", 3*3600)
	samt = time.FixedZone("SAMT", 4*3600)
)

func zoneFor(hours int) *time.Location {
	switch hours {
	case 3:
		return msk
	case 4:
		return samt
	}
	return time.FixedZone("UTC+"+strconv.Itoa(hours), hours*3600)
}
