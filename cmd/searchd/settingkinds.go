package main

import (
	"cmp"
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/webhooks"
)

// spec is one row of [settingsTable]: a setting's names, its kind (how
// it is parsed, its default and range), and its documentation.
type spec struct {
	env  string
	flag string // without dashes; "" for a setting read from the environment alone
	was  renamed
	// secret marks a value that has no flag (`ps` shows flags) and that no
	// message quotes.
	secret bool
	in     cmds // the commands that read it
	kind   kind
	// def and devDef document a default the kind cannot write; devDef only
	// where dev's differs.
	def, devDef string
	values      string // overrides the kind's description of its values
	// meaning says what the setting does, `code` in backticks.
	meaning string
	example string // the placeholder searchd.example.env sets a required setting to
}

// renamed is a setting's old variable and flag, still read with a
// warning unless the new name is set too.
type renamed struct{ env, flag string }

type section struct {
	title, about string
	settings     []spec
}

func allSettings() []spec {
	var all []spec
	for _, sec := range settingsTable {
		all = append(all, sec.settings...)
	}
	return all
}

// cmds is a set of the commands that read settings.
type cmds uint16

const (
	cmdServe cmds = 1 << iota
	cmdDev
	cmdMigrate
	cmdToken
	cmdSweep
	cmdClaimsShow
	cmdClaimsChange // claims release and claims resolve
	cmdInbox
	cmdRunsList
	cmdRunsRetry
	cmdKeys // keys create, list and revoke

	cmdServers   = cmdServe | cmdDev
	cmdConnected = cmdServers | cmdMigrate | cmdSweep | cmdClaimsShow | cmdClaimsChange | cmdInbox | cmdRunsList | cmdRunsRetry |
		cmdKeys
	cmdLogging = cmdServers | cmdSweep | cmdClaimsChange | cmdRunsRetry
)

// cmdNames name the commands in the documentation, in its order.
var cmdNames = []struct {
	c    cmds
	name string
}{
	{cmdServe, "serve"}, {cmdDev, "dev"}, {cmdMigrate, "migrate"}, {cmdToken, "token"}, {cmdSweep, "sweep"},
	{cmdClaimsShow, "claims show"}, {cmdClaimsChange, "claims release/resolve"}, {cmdInbox, "inbox"},
	{cmdRunsList, "runs dispatch list"}, {cmdRunsRetry, "runs dispatch retry"}, {cmdKeys, "keys"},
}

func (cs cmds) String() string {
	if cs == cmdConnected {
		return "every command that connects to the database"
	}
	var names []string
	for _, n := range cmdNames {
		if cs&n.c != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ", ")
}

// defaultText is the setting's default as documented for serve, or for
// dev when dev is set.
func (s spec) defaultText(dev bool) string {
	return cmp.Or(devOr(dev, s.devDef, s.def), s.kind.literal(dev), "none")
}

// given is flag, or secret or env for a setting with no flag, a secret
// or not.
func (s spec) given(flag, secret, env string) string {
	switch {
	case s.secret:
		return secret
	case s.flag == "":
		return env
	}
	return flag
}

// defaults is the default of s as text writes it for serve, then dev's
// where it differs.
func (s spec) defaults(text func(dev bool) string) string {
	d := text(false)
	if s.in&cmdDev != 0 && s.defaultText(true) != s.defaultText(false) {
		d += " (dev: " + text(true) + ")"
	}
	return d
}

func (s spec) valuesText() string { return cmp.Or(s.values, s.kind.values()) }

// kind is how a setting is parsed into the configuration being loaded,
// its default and the values it takes.
type kind interface {
	// set puts s.value, or the default when it is "", in its place in
	// r.cfg, and returns what is wrong with it, without the setting's
	// name (it never quotes a secret), or "".
	set(r *reader, s setting) string
	// literal is the default written as a value, "" when it has none that
	// can be written.
	literal(dev bool) string
	values() string
}

// loading is the configuration being loaded: what serve and dev run
// with, and the parts of it assembled only when the settings that turn
// them on are set.
type loading struct {
	serverConfig
	oidc   auth.OIDCConfig
	signIn auth.SignInConfig
	scopes string
}

type reader struct {
	dev bool
	cfg *loading
	// given holds every setting read so far, by variable, named as the
	// user gave it: a message about one setting may name another.
	given    map[string]setting
	problems []string
	failed   map[string]bool // the settings with a problem, by name
}

func (r *reader) bad(s setting, format string, args ...any) {
	r.problems = append(r.problems, s.name+": "+fmt.Sprintf(format, args...))
	r.failed[s.name] = true
}

// ok reports whether the settings of envs were read without a problem.
func (r *reader) ok(envs ...string) bool {
	for _, env := range envs {
		if r.failed[r.name(env)] {
			return false
		}
	}
	return true
}

// name is how the user gave the setting of variable env: its flag when
// given, else the variable.
func (r *reader) name(env string) string { return cmp.Or(r.given[env].name, env) }

// loadSettings reads the settings of command c from the flags on fs and
// the environment, in the table's order (a setting may depend on one
// read before it), then checks what settings say of one another. It
// returns every problem, one line per setting, each naming the setting as
// the user gave it.
func loadSettings(fs *flag.FlagSet, getenv func(string) string, c cmds) (serverConfig, []string) {
	r := &reader{dev: c == cmdDev, cfg: defaults(c == cmdDev), given: map[string]setting{}, failed: map[string]bool{}}
	for _, s := range allSettings() {
		if s.in&c == 0 {
			continue
		}
		given := lookup(fs, s.flag, s.env, getenv) // the variable alone when there is no flag
		if s.was.env != "" {
			if old := lookup(fs, s.was.flag, s.was.env, getenv); old.value != "" && given.value != "" {
				r.bad(given, "%s is its old name: set one of them", old.name)
			} else if old.value != "" {
				now := s.env
				if strings.HasPrefix(old.name, "--") {
					now = "--" + s.flag
				}
				r.cfg.renamed = append(r.cfg.renamed, old.name+" is deprecated: set "+now+" instead")
				given = old
			}
		}
		r.given[s.env] = given
		if p := s.kind.set(r, given); p != "" {
			r.bad(given, "%s", p)
		}
	}
	checkSettings(r, c)
	return r.cfg.serverConfig, r.problems
}

// setValue reads s into *p: def when s is empty, else what parse makes of
// the value, when check (its range; nil for none) finds no problem. notA
// completes the message `"value" is not ` of a value parse refuses. It
// returns the problem, or "".
func setValue[T any](p *T, s setting, def T, parse func(string) (T, error), notA string, check func(T) string) string {
	*p = def
	if s.value == "" {
		return ""
	}
	v, err := parse(s.value)
	if err != nil {
		return fmt.Sprintf("%q is not %s", s.value, notA)
	}
	if check != nil {
		if problem := check(v); problem != "" {
			return problem
		}
	}
	*p = v
	return ""
}

func parseWhole(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

type boolean struct{ at func(*loading) *bool }

func (k boolean) set(r *reader, s setting) string {
	p := k.at(r.cfg)
	return setValue(p, s, *p, strconv.ParseBool, "true or false", nil)
}

func (k boolean) literal(dev bool) string { return strconv.FormatBool(*k.at(defaults(dev))) }

func (boolean) values() string { return "true or false" }

// text is a string, checked when it is not empty.
type text struct {
	at func(*loading) *string
	// check returns what is wrong with a value that is not empty, or "".
	check func(s setting) string
	// required, when not "", makes the setting required but in dev, and
	// completes "is required: ".
	required string
	desc     string // the values it takes
}

func (k text) set(r *reader, s setting) string {
	p := k.at(r.cfg)
	*p = cmp.Or(s.value, *p)
	switch {
	case *p == "" && k.required != "" && !r.dev:
		return "is required: " + k.required
	case *p == "" || k.check == nil:
		return ""
	}
	return k.check(setting{name: s.name, value: *p})
}

func (k text) literal(dev bool) string { return *k.at(defaults(dev)) }

func (k text) values() string { return k.desc }

func devOr(dev bool, devDef, def string) string {
	if dev && devDef != "" {
		return devDef
	}
	return def
}

// custom is a setting parsed by a function of its own: one whose value
// is a list, or whose range depends on another setting. With no parse
// function it is read elsewhere, by name (the standard OpenTelemetry
// variables, which telemetry.go and the SDK read), and in the table for
// its documentation.
type custom struct {
	lit, devLit string // the default as a value, "" for none
	desc        string
	parse       func(r *reader, s setting) string
}

func (k custom) set(r *reader, s setting) string {
	if k.parse == nil {
		return ""
	}
	return k.parse(r, s)
}

func (k custom) literal(dev bool) string { return devOr(dev, k.devLit, k.lit) }

func (k custom) values() string { return k.desc }

func (s spec) about() string {
	if s.was.env == "" {
		return s.meaning
	}
	return s.meaning + "; formerly `" + s.was.env + "` (`--" + s.was.flag + "`), still read with a warning"
}

// field is a setting held in a Config (a package's, or cmd/searchd's own
// [serverConfig]), which says it once: its default is what [defaults]
// holds, its range what the Config's Validate accepts. Validate's
// errors read "pkg: Config.Field is V; it must be R".
type field[T int | int32 | int64 | float64 | time.Duration] struct {
	at   func(*loading) *T
	of   string // what a whole number counts, for the message: "bytes"
	like string // how to write a duration ("10s or 1m") or a decimal ("0.25")
	// none marks 0 as a value of its own, checked as it is; otherwise the
	// Config would read 0 as its default, and 0 is refused.
	none  bool
	short bool // a duration written without trailing zero units: 1h, not 1h0m0s
}

func (k field[T]) set(r *reader, s setting) string {
	if s.value == "" {
		return "" // the default, which r.cfg holds
	}
	var v T
	var err error
	notA := "a whole number" + strings.TrimSuffix(" of "+k.of, " of ")
	switch p := any(&v).(type) {
	case *time.Duration:
		*p, err = time.ParseDuration(s.value)
		notA = "a duration (write it like " + k.like + ")"
	case *float64:
		*p, err = strconv.ParseFloat(s.value, 64)
		notA = "a number (write it like " + k.like + ")"
	default:
		var n int64
		n, err = strconv.ParseInt(s.value, 10, 64)
		if v = T(n); err == nil && int64(v) != n {
			return fmt.Sprintf("%d is out of range: %s", n, k.values())
		}
	}
	if err != nil {
		return fmt.Sprintf("%q is not %s", s.value, notA)
	}
	probe := v
	if v == 0 && !k.none {
		probe = -1 // the Config would read 0 as its default
	}
	if err := k.probe(r.cfg, probe); err != nil {
		field, _, _ := strings.Cut(err.Error(), " is ")
		if strings.HasPrefix(field, "searchd:") {
			return fmt.Sprintf("%s is out of range: %s", k.str(v), rangeOf(err))
		}
		return fmt.Sprintf("%s is out of range: %s (%s)", k.str(v), rangeOf(err), field)
	}
	*k.at(r.cfg) = v
	return ""
}

// probe returns the error of the Config's Validate about k's field set
// to v; the field is left as it was.
func (k field[T]) probe(c *loading, v T) error {
	p := k.at(c)
	old := *p
	*p = v
	defer func() { *p = old }()
	for _, err := range c.problems() {
		if err != nil && strings.Contains(err.Error(), "Config."+fieldName(c, p)+" is ") {
			return err
		}
	}
	return nil
}

// literal is "" for a zero default that is refused (it depends on
// another setting, which the row's def says).
func (k field[T]) literal(dev bool) string {
	if v := *k.at(defaults(dev)); v != 0 || k.none {
		return k.str(v)
	}
	return ""
}

func (k field[T]) str(v T) string {
	if d, ok := any(v).(time.Duration); ok && k.short {
		return shortDuration(d)
	}
	return fmt.Sprint(v)
}

// values asks the Config's Validate for the range with a value below any.
func (k field[T]) values() string { return rangeOf(k.probe(defaults(false), -1)) }

// rangeOf is the range a Validate error states, "" for none.
func rangeOf(err error) string {
	if err == nil {
		return ""
	}
	_, rng, _ := strings.Cut(err.Error(), "; it must be ")
	return rng
}

// fieldName is the name of the field of c that p points to, "" for none.
func fieldName(c *loading, p any) string {
	want := reflect.ValueOf(p)
	var find func(v reflect.Value) string
	find = func(v reflect.Value) string {
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Addr().Type() == want.Type() && f.Addr().Pointer() == want.Pointer() {
				return v.Type().Field(i).Name
			}
			if f.Kind() == reflect.Struct {
				if name := find(f); name != "" {
					return name
				}
			}
		}
		return ""
	}
	return find(reflect.ValueOf(c).Elem())
}

// defaults is the configuration before any setting is read, from each
// package's Config and cmd/searchd's own. A zero default depends on
// another setting (the row says which).
func defaults(dev bool) *loading {
	q, sw, sd := seatq.Config{}.WithDefaults(), sweeper.Config{}.WithDefaults(), schedule.DrainConfig{}.WithDefaults()
	sd.Lease = 0 // twice the saved-search lease unless set (checkScheduleLease)
	return &loading{
		serverConfig: serverConfig{
			Addr:                devOr(dev, "127.0.0.1:8080", ":8080"),
			ShutdownGrace:       10 * time.Second,
			MaxBodyBytes:        api.DefaultMaxBodyBytes,
			MaxHeaderBytes:      16 << 10, // a bearer token of 8 KiB (auth.MaxTokenBytes) and a console cookie fit
			CallbackBodyTimeout: api.DefaultCallbackBodyTimeout,
			MaxPreferWait:       api.PreferWaitLimit,
			SavedSearchLease:    idempotency.SavedSearchStartLease,
			ScheduleMax:         schedule.DefaultMaxPerOrganization,
			DevDir:              ".searchd-dev",
			Session:             sessionBounds{IdleInTransaction: 5 * time.Second, Lock: 10 * time.Second, Statement: 15 * time.Second},
			DBAnswerTimeout:     defaultDBAnswerTimeout,
			Auth:                authConfig{MaxLifetime: auth.DefaultMaxLifetime, SessionLifetime: 8 * time.Hour, TokenSignIn: dev},
			Dispatch:            dispatch.Config{}.WithDefaults(),
			Streams:             runstream.Config{}.WithDefaults(),
			Schedule:            sd,
			Webhooks:            webhookConfig{Worker: webhooks.WorkerConfig{}.WithDefaults(), AllowHTTPLoopback: dev},
			Inbox:               inboxConfig{Lease: idempotency.WebhookLease, Applier: providerjobs.ApplierConfig{}.WithDefaults()},
			// The seats are the pool's size and the wide seats a share of the
			// processors, and the sweep bound at most its ceiling, unless set.
			Seats: seatq.Config{QueueLength: q.QueueLength, MaxWait: q.MaxWait},
			Sweep: sweeper.Config{Interval: sw.Interval, MaxBound: sw.MaxBound, Budget: sw.Budget, Duty: sw.Duty},
		},
		oidc:   auth.OIDCConfig{OrgClaim: "org_id", ActorClaim: "sub", RoleClaim: "roles"},
		scopes: "openid",
	}
}

// problems are the errors of the Validate of every Config settings hold.
func (c *loading) problems() []error {
	return []error{c.validate(), c.Dispatch.Validate(), c.Streams.Validate(), c.Schedule.Validate(), c.Inbox.Applier.Validate(),
		c.Seats.Validate(), c.Sweep.Validate(), c.Webhooks.Worker.Validate()}
}
