package main

import (
	"cmp"
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/webhooks"
)

// spec declares one setting of searchd, once: where it is read from, its
// default, the values it takes, what it means, and, through its kind, how
// it is parsed into the configuration. [settingsTable] lists them all; the
// loader, --help, docs/settings.md and searchd.example.env are made from
// it.
type spec struct {
	env  string
	flag string // without dashes; "" for a setting read from the environment alone
	// was is the setting's old name, still read, with a warning.
	was renamed
	// secret marks a value nobody else may read: it has no flag (a
	// flag's value is in the process list for every local user to read)
	// and no message quotes it.
	secret bool
	// in are the commands that read the setting.
	in cmds
	// kind parses the value into its place and knows its typed default
	// and its range.
	kind kind
	// def and devDef are the defaults as documented, when the kind's
	// literal default does not say it (it depends on another setting,
	// or the setting is required); devDef only where dev's differs.
	def, devDef string
	// values overrides the kind's description of the values it takes.
	values string
	// meaning says what the setting does, in text where `code` is marked
	// with backticks and docs/NAME.md names a document.
	meaning string
	// example is the value searchd.example.env sets a required setting
	// to: a placeholder to replace (a secret's is refused until it is).
	example string
}

// renamed is a setting's old variable and flag, still read (a deployment
// that sets one is warned at start) unless the new name is set too.
type renamed struct{ env, flag string }

// section is a group of settings under a heading of their own.
type section struct {
	title, about string
	settings     []spec
}

// allSettings returns every setting of [settingsTable], in its order.
func allSettings() []spec {
	var all []spec
	for _, sec := range settingsTable {
		all = append(all, sec.settings...)
	}
	return all
}

// cmds is a set of commands.
type cmds uint16

// The commands that read settings.
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

// String names the commands of cs, separated by commas.
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

// given is flag, the text for a setting given by its flag, or secret or
// env for a setting read from the environment alone, a secret or not.
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

// valuesText describes the values the setting takes.
func (s spec) valuesText() string { return cmp.Or(s.values, s.kind.values()) }

// kind is the type of a setting: it parses a value into the setting's
// place in the configuration being loaded, and states the typed default
// and the values it takes.
type kind interface {
	// set puts s.value, or the default when it is "", in its place in
	// r.cfg, and returns what is wrong with it, without the setting's
	// name (it never quotes a secret), or "".
	set(r *reader, s setting) string
	// literal is the default written as a value ("" when it has none that
	// can be written: it depends on another setting, or there is none).
	literal(dev bool) string
	// values describes the values taken.
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

// reader reads the settings of one command.
type reader struct {
	fs     *flag.FlagSet
	getenv func(string) string
	dev    bool
	cfg    *loading
	// given holds every setting read so far, by variable, named as the
	// user gave it: a message about one setting may name another.
	given    map[string]setting
	old      []string // the old names used, for [warnRenamedSettings]
	problems []string
	failed   map[string]bool // the settings with a problem, by name
}

// bad records a problem with the setting s.
func (r *reader) bad(s setting, format string, args ...any) {
	r.problems = append(r.problems, s.name+": "+fmt.Sprintf(format, args...))
	r.failed[s.name] = true
}

// ok reports whether the settings of the variables envs were read without
// a problem.
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
	r := &reader{fs: fs, getenv: getenv, dev: c == cmdDev, cfg: defaults(c == cmdDev), given: map[string]setting{}, failed: map[string]bool{}}
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
				r.old = append(r.old, old.name+" is deprecated: set "+now+" instead")
				given = old
			}
		}
		r.given[s.env] = given
		if p := s.kind.set(r, given); p != "" {
			r.bad(given, "%s", p)
		}
	}
	for _, check := range settingChecks {
		if check.in&c != 0 {
			check.run(r)
		}
	}
	r.cfg.renamed = r.old
	return r.cfg.serverConfig, r.problems
}

// durationKind is a time.Duration in a closed range, or one open below.
type durationKind struct {
	at       func(*loading) *time.Duration
	def      time.Duration
	min, max time.Duration
	above    bool          // more than min, not from it
	none     bool          // 0s (none) is taken too, below min
	whole    time.Duration // a whole number of these, or any when 0
	like     string        // how to write one: "10s or 1m30s"
	short    bool          // written without trailing zero units: 1h, not 1h0m0s
	why      string        // appended to the message of a value out of range
	desc     string        // the values it takes, when the range does not say it
}

func (k durationKind) str(d time.Duration) string {
	if k.short {
		return shortDuration(d)
	}
	return d.String()
}

func (k durationKind) set(r *reader, s setting) string {
	return setValue(k.at(r.cfg), s, k.def, time.ParseDuration, "a duration (write it like "+k.like+")", func(d time.Duration) string {
		if (d != 0 || !k.none) && (d < k.min || (k.above && d == k.min) || d > k.max || (k.whole > 0 && d%k.whole != 0)) {
			return fmt.Sprintf("%s is out of range: %s%s", k.str(d), k.values(), k.why)
		}
		return ""
	})
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

func (k durationKind) literal(bool) string { return k.str(k.def) }

func (k durationKind) values() string {
	var unit string
	switch k.whole {
	case time.Second:
		unit = "whole seconds "
	case time.Millisecond:
		unit = "whole milliseconds "
	}
	switch {
	case k.desc != "":
		return k.desc
	case k.above:
		return unit + "more than " + k.str(k.min) + " and at most " + k.str(k.max)
	}
	return unit + "from " + k.str(k.min) + " to " + k.str(k.max)
}

// integer is a whole number in a range.
type integer[T int | int32 | int64] struct {
	at       func(*loading) *T
	def      T
	min, max T      // no ceiling when max is 0
	of       string // what it counts, for the message: "bytes"
	zero     bool   // the default is 0, which the component reads as its own default
}

func (k integer[T]) set(r *reader, s setting) string {
	notA := "a whole number"
	if k.of != "" {
		notA += " of " + k.of
	}
	n := int64(k.def) // checked in range before it is a T
	problem := setValue(&n, s, n, parseWhole, notA, func(n int64) string {
		if n < int64(k.min) || (k.max != 0 && n > int64(k.max)) {
			return fmt.Sprintf("%d is out of range: %s", n, k.values())
		}
		return ""
	})
	*k.at(r.cfg) = T(n)
	return problem
}

func parseWhole(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

func (k integer[T]) literal(bool) string {
	if k.zero {
		return ""
	}
	return strconv.FormatInt(int64(k.def), 10)
}

func (k integer[T]) values() string {
	if k.max == 0 {
		return fmt.Sprintf("at least %d", k.min)
	}
	return fmt.Sprintf("from %d to %d", k.min, k.max)
}

// boolean is true or false.
type boolean struct {
	at          func(*loading) *bool
	def, devDef bool
}

func (k boolean) set(r *reader, s setting) string {
	def := k.def
	if r.dev {
		def = k.devDef
	}
	return setValue(k.at(r.cfg), s, def, strconv.ParseBool, "true or false", nil)
}

func (k boolean) literal(dev bool) string {
	if dev {
		return strconv.FormatBool(k.devDef)
	}
	return strconv.FormatBool(k.def)
}

func (boolean) values() string { return "true or false" }

// text is a string, checked when it is not empty.
type text struct {
	at          func(*loading) *string
	def, devDef string
	// check returns what is wrong with a value that is not empty, or "".
	check func(s setting) string
	// required, when not "", makes the setting required but in dev, and
	// completes "is required: ".
	required string
	desc     string // the values it takes
}

func (k text) set(r *reader, s setting) string {
	p := k.at(r.cfg)
	*p = cmp.Or(s.value, k.literal(r.dev))
	switch {
	case *p == "" && k.required != "" && !r.dev:
		return "is required: " + k.required
	case *p == "" || k.check == nil:
		return ""
	}
	return k.check(setting{name: s.name, value: *p})
}

func (k text) literal(dev bool) string { return devOr(dev, k.devDef, k.def) }

// devOr is devDef in dev when it is set, else def.
func devOr(dev bool, devDef, def string) string {
	if dev && devDef != "" {
		return devDef
	}
	return def
}

func (k text) values() string { return k.desc }

// custom is a setting parsed by a function of its own: one whose value
// is a list, or whose range depends on another setting.
type custom struct {
	lit, devLit string // the default as a value, "" for none
	desc        string
	parse       func(r *reader, s setting) string
}

func (k custom) set(r *reader, s setting) string { return k.parse(r, s) }

func (k custom) literal(dev bool) string { return devOr(dev, k.devLit, k.lit) }

func (k custom) values() string { return k.desc }

// external is a setting read elsewhere, by name: the standard
// OpenTelemetry variables, which telemetry.go and the SDK read. It is in
// the table for its documentation.
type external struct{ desc string }

func (external) set(*reader, setting) string { return "" }
func (external) literal(bool) string         { return "" }
func (k external) values() string            { return k.desc }

// settingCheck is a check of what settings say of one another, run after
// every setting of a command in was read.
type settingCheck struct {
	in  cmds
	run func(r *reader)
}

// about is the setting's meaning, and its old name when it was renamed.
func (s spec) about() string {
	if s.was.env == "" {
		return s.meaning
	}
	return s.meaning + "; formerly `" + s.was.env + "` (`--" + s.was.flag + "`), still read with a warning"
}

// field is a setting held in a package's Config, which says it once: its
// default is what the Config's defaults hold (see [defaults]), its range
// what the Config's Validate (valid) accepts. Validate's errors read
// "pkg: Config.Field is V; it must be R".
type field[T int | time.Duration] struct {
	at    func(*loading) *T
	valid func(*loading) error
	of    string // what a number counts, for the message: "bytes"
	like  string // how to write a duration: "10s or 1m"
	none  bool   // 0 is taken, as none (the Config reads 0 as its default)
}

func (k field[T]) set(r *reader, s setting) string {
	if s.value == "" {
		return "" // the default, which r.cfg holds
	}
	var v T
	var err error
	switch p := any(&v).(type) {
	case *time.Duration:
		*p, err = time.ParseDuration(s.value)
	case *int:
		*p, err = strconv.Atoi(s.value)
	}
	if err != nil && k.like != "" {
		return fmt.Sprintf("%q is not a duration (write it like %s)", s.value, k.like)
	} else if err != nil {
		return fmt.Sprintf("%q is not a whole number%s", s.value, strings.TrimSuffix(" of "+k.of, " of "))
	}
	if d := defaults(r.dev); v == 0 && k.none {
		*k.at(r.cfg) = 0
	} else if v == 0 && *k.at(d) != 0 { // the Config would read 0 as its default
		err = k.probe(d, k.at(d), ^T(0)) // -1, for the range
	} else {
		err = k.probe(r.cfg, k.at(r.cfg), v)
	}
	if err != nil {
		field, _, _ := strings.Cut(err.Error(), " is ")
		_, rng, _ := strings.Cut(err.Error(), "; it must be ")
		return fmt.Sprintf("%v is out of range: %s (%s)", v, rng, field)
	}
	return ""
}

// probe puts v in *p, a field of c, and returns the error of the Config's
// Validate about that field; then *p is as it was, so the next settings
// are checked against a Config in range.
func (k field[T]) probe(c *loading, p *T, v T) error {
	old := *p
	*p = v
	if err := k.valid(c); err != nil && strings.Contains(err.Error(), "Config."+fieldName(c, p)+" ") {
		*p = old
		return err
	}
	return nil
}

func (k field[T]) literal(dev bool) string { return fmt.Sprint(*k.at(defaults(dev))) }

// values is the range, asked of the Config's Validate with a value below any.
func (k field[T]) values() string {
	c := defaults(false)
	if err := k.probe(c, k.at(c), ^T(0)); err != nil { // -1
		_, rng, _ := strings.Cut(err.Error(), "; it must be ")
		return rng
	}
	return ""
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

// defaults is the configuration before any setting is read: the defaults
// of each package's Config, which are the settings' defaults.
func defaults(bool) *loading {
	q := seatq.Config{}.WithDefaults()
	return &loading{serverConfig: serverConfig{
		Dispatch: dispatch.Config{}.WithDefaults(),
		Streams:  runstream.Config{}.WithDefaults(),
		Schedule: schedule.DrainConfig{}.WithDefaults(),
		Webhooks: webhookConfig{Worker: webhooks.WorkerConfig{}.WithDefaults()},
		Inbox:    inboxConfig{Applier: providerjobs.ApplierConfig{}.WithDefaults()},
		// The seats are the pool's size and the wide seats a share of the
		// processors, unless set (seats.go).
		Seats: seatq.Config{QueueLength: q.QueueLength, MaxWait: q.MaxWait},
	}}
}

// dispatchValid and the others are the Validate of the Configs settings hold.
func dispatchValid(c *loading) error { return c.Dispatch.Validate() }
func streamsValid(c *loading) error  { return c.Streams.Validate() }
func scheduleValid(c *loading) error { return c.Schedule.Validate() }
func applierValid(c *loading) error  { return c.Inbox.Applier.Validate() }
func seatsValid(c *loading) error    { return c.Seats.Validate() }
