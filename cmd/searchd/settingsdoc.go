package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// This file makes what users read of the settings from [settingsTable]:
// each command's --help, docs/settings.md and searchd.example.env.

// command describes a subcommand for its --help.
type command struct {
	usage string // "searchd serve [flags]"
	about string
	reads cmds // the command, whose settings --help lists
}

var (
	serveCommand = command{"searchd serve [flags]",
		"Serve the HTTP API until SIGTERM or SIGINT, then drain (see --shutdown-grace).",
		cmdServe}
	devCommand = command{"searchd dev [flags]",
		"Run locally: PostgreSQL under the dev directory (unless DATABASE_URL is set), migrations, demo data, a token, the API.",
		cmdDev}
	migrateCommand = command{"searchd migrate [flags]",
		"Apply the database migrations and print the versions applied.",
		cmdMigrate}
	tokenCommand = command{"searchd token --org UUID [--sub S] [--ttl 1h] | searchd token --operator --sub NAME [--org UUID] | searchd token --runtime --org UUID --sub NAME | searchd token --admin --org UUID --sub NAME",
		"Print an HS256 bearer token for the organization, signed with the secret the server verifies with. " +
			"With --operator, print an operator's token instead: the role claim \"operator\" opens the console's " +
			"operator views (every organization's claims, force-release, the sweeper's runs), which an " +
			"organization's token never reaches; --sub names the operator, recorded with every release. " +
			"With --runtime, print a runtime credential of the organization: the role claim \"runtime\" opens " +
			"PUT /v1/runs/{id}/status (status reports) and nothing else, and no other token opens that route; " +
			"--sub names the runtime, recorded with every status change it reports. " +
			"With --admin, print an organization admin's token: the role claim \"admin\" also opens the management " +
			"of the organization's service keys (/v1/service-keys); --sub names the admin.",
		cmdToken}
	settingsCommand = command{"searchd settings [--format env|markdown]",
		"Print every setting of searchd with its meaning, its values and its default: as an example env file " +
			"(searchd.example.env), or as the Markdown reference (docs/settings.md).",
		0}
)

// registerOptions adds a string flag for every setting of c that has one,
// and makes --help print c's usage, its own flags and every setting.
func registerOptions(fs *flag.FlagSet, c command) {
	settingFlags := map[string]bool{}
	for _, s := range allSettings() {
		if s.in&c.reads != 0 && s.flag != "" {
			fs.String(s.flag, "", plain(s.about()))
			settingFlags[s.flag] = true
			if s.was.flag != "" {
				fs.String(s.was.flag, "", "deprecated: use --"+s.flag)
				settingFlags[s.was.flag] = true
			}
		}
	}
	fs.Usage = func() { printUsage(fs, c, settingFlags) }
}

// printUsage writes c's help: the flags of the command itself (registered
// on fs besides the settings), then every setting with its flag, its
// variable, its default, its values and its meaning.
func printUsage(fs *flag.FlagSet, c command, settingFlags map[string]bool) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: %s\n\n", c.usage)
	for _, line := range wrap(c.about, 78) {
		fmt.Fprintln(w, line)
	}
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !settingFlags[f.Name] {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		for _, f := range own {
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(w, "  --%s%s\n        %s\n", f.Name, def, f.Usage)
		}
	}
	if c.reads == 0 {
		return
	}
	fmt.Fprintf(w, "\nsettings: a flag given wins over its environment variable\n")
	for _, s := range allSettings() {
		if s.in&c.reads != 0 {
			printOption(w, s, c.reads == cmdDev)
		}
	}
}

func printOption(w io.Writer, s spec, dev bool) {
	name := s.given("--"+s.flag+", "+s.env, s.env+" (environment only: a secret)", s.env+" (environment only)")
	fmt.Fprintf(w, "  %s\n        default: %s\n", name, plain(s.defaultText(dev)))
	for _, line := range wrap("values: "+plain(s.valuesText()), 70) {
		fmt.Fprintf(w, "        %s\n", line)
	}
	for _, line := range wrap(plain(s.about()), 70) {
		fmt.Fprintf(w, "        %s\n", line)
	}
}

// wrap breaks text into lines of at most width bytes, at spaces; a word
// longer than width stands on a line of its own.
func wrap(text string, width int) []string {
	var lines []string
	for _, word := range strings.Fields(text) {
		if n := len(lines); n > 0 && len(lines[n-1])+1+len(word) <= width {
			lines[n-1] += " " + word
		} else {
			lines = append(lines, word)
		}
	}
	return lines
}

// plain is a text of the table without its marks: `code` as code.
func plain(s string) string { return strings.ReplaceAll(s, "`", "") }

// sentence is text with its first letter upper-case, when it is a letter.
func sentence(text string) string {
	if text != "" && 'a' <= text[0] && text[0] <= 'z' {
		return strings.ToUpper(text[:1]) + text[1:]
	}
	return text
}

// docLink is a document a text names, linked in docs/settings.md.
var docLink = regexp.MustCompile(`docs/([a-z-]+\.md)`)

// markdown is a text of the table in a cell of docs/settings.md: the
// documents it names linked, and no cell broken by a bar.
func markdown(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return docLink.ReplaceAllString(s, "[docs/$1]($1)")
}

// settings runs `searchd settings`: it prints the reference of every
// setting, made from the table this binary reads them by.
func (a *app) settings(_ context.Context, args []string) error {
	fs := a.flagSet("settings", settingsCommand)
	format := fs.String("format", "env", "env: searchd.example.env; markdown: docs/settings.md")
	if err := parse(fs, args); err != nil {
		return err
	}
	write, ok := map[string]func(io.Writer){"env": writeExampleEnv, "markdown": writeSettingsMarkdown}[*format]
	if !ok {
		return usagef("--format: %q is not a format: use env or markdown", *format)
	}
	write(a.stdout)
	return nil
}

// regenerate says how to write the generated files again.
const regenerate = "make settings-docs"

// defaultCell is the default of s in docs/settings.md: a value as code,
// a description as text, dev's after serve's where it differs.
func defaultCell(s spec) string {
	cell := func(dev bool) string {
		if (dev && s.devDef != "") || (!dev && s.def != "") || s.kind.literal(dev) == "" {
			return markdown(s.defaultText(dev))
		}
		return "`" + s.kind.literal(dev) + "`"
	}
	return s.defaults(cell)
}

// writeSettingsMarkdown writes docs/settings.md.
func writeSettingsMarkdown(w io.Writer) {
	fmt.Fprintf(w, "<!-- Generated by `%s` (go run ./cmd/searchd settings --format markdown) from the settings table\n"+
		"     in cmd/searchd/settings.go: change the table, not this file. A test fails when they differ. -->\n\n", regenerate)
	fmt.Fprint(w, `# Settings

searchd reads its settings from the environment and from flags, in
`+"`cmd/searchd`"+` alone; a flag given on the command line wins over its
variable. Secrets have no flag, because a flag's value is in the process
list for every local user to read. A value searchd cannot take stops the
command with exit status 2 and a message that names the setting as it was
given (the flag, else the variable) and says what is wrong, for every
setting at once; nothing is clamped. `+"`searchd <command> --help`"+` lists
the settings a command reads. [searchd.example.env](../searchd.example.env)
is an example file of every setting with its default (`+"`searchd settings`"+`
prints it for the binary at hand).

`)
	for _, sec := range settingsTable {
		fmt.Fprintf(w, "- [%s](#%s)\n", sec.title, anchor(sec.title))
	}
	fmt.Fprintf(w, "- [Removed settings](#removed-settings)\n")
	for _, sec := range settingsTable {
		fmt.Fprintf(w, "\n## %s\n\n", sec.title)
		if sec.about != "" {
			for _, line := range wrap(markdown(sec.about), 76) {
				fmt.Fprintln(w, line)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "| Variable | Flag | Read by | Default | Values | Meaning |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, s := range sec.settings {
			flag := s.given("`--"+s.flag+"`", "none: a secret", "none")
			fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s |\n", s.env, flag, s.in, defaultCell(s),
				markdown(s.valuesText()), markdown(s.about()))
		}
	}
	fmt.Fprint(w, "\n## Removed settings\n\nNo longer read: `serve`, `dev` and `sweep` log a warning naming each one still set, "+
		"and refuse its flag as unknown.\n\n")
	for _, r := range removedSettings {
		fmt.Fprintf(w, "- `%s`: %s\n", r.env, markdown(r.why))
	}
}

// anchor is the fragment GitHub gives a heading.
func anchor(heading string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == ' ':
			return '-'
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
			return r
		}
		return -1
	}, strings.ToLower(heading))
}

// writeExampleEnv writes searchd.example.env: every setting commented
// with its meaning, its values and its default, the required ones set to
// placeholders.
func writeExampleEnv(w io.Writer) {
	comment := func(text string) {
		for _, line := range wrap(plain(text), 76) {
			fmt.Fprintf(w, "# %s\n", line)
		}
	}
	comment("searchd.example.env: every setting of searchd, with its meaning, the values it takes and its default.")
	comment(fmt.Sprintf("Generated by `%s` (searchd settings --format env) from the settings table in cmd/searchd/settings.go: "+
		"change the table, not this file. docs/settings.md is the same reference as a page.", regenerate))
	fmt.Fprintln(w, "#")
	comment("Use it as an env file (podman or docker run --env-file, systemd's EnvironmentFile=, " +
		"a Kubernetes ConfigMap, the secrets in a Secret). A line \"# NAME=value\" shows the default: uncomment it " +
		"to change it. The lines set are required: replace their CHANGE-ME placeholders. A flag on the command line " +
		"wins over its variable. The file holds secrets once filled in: keep it readable by searchd alone.")
	for _, sec := range settingsTable {
		fmt.Fprintf(w, "\n\n####### %s\n", sec.title)
		if sec.about != "" {
			comment(sec.about)
		}
		for _, s := range sec.settings {
			fmt.Fprintln(w)
			comment(s.env + s.given(" (flag --"+s.flag, " (a secret: environment only, no flag", " (environment only") +
				"; read by " + s.in.String() + ")")
			comment(sentence(s.about()) + ".")
			comment("Values: " + s.valuesText() + ".")
			comment("Default: " + s.defaults(s.defaultText) + ".")
			if s.example != "" {
				fmt.Fprintf(w, "%s=%s\n", s.env, s.example)
				continue
			}
			fmt.Fprintf(w, "# %s=%s\n", s.env, s.kind.literal(false))
		}
	}
}
