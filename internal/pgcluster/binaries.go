package pgcluster

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// EnvPGBin names the directory of initdb and postgres; when set,
// [FindBinaries] looks nowhere else.
const EnvPGBin = "SEARCHD_PG_BIN"

// ErrNoBinaries reports that initdb and postgres were not found. Its
// message says where the search looked and how to install them.
var ErrNoBinaries = errors.New("PostgreSQL server programs (initdb, postgres) not found; " +
	"install them with `apt-get install postgresql`, or set " + EnvPGBin + " to the directory holding them")

// Binaries are the paths of the PostgreSQL programs a cluster runs.
type Binaries struct {
	Initdb   string
	Postgres string
}

// FindBinaries locates initdb and postgres in pgBin if not empty (and only
// there), else `pg_config --bindir`, the newest /usr/lib/postgresql/*/bin
// and $PATH. It returns an error wrapping [ErrNoBinaries] if none has both.
func FindBinaries(pgBin string) (Binaries, error) {
	if pgBin != "" {
		if b, ok := inDir(pgBin); ok {
			return b, nil
		}
		return Binaries{}, fmt.Errorf("%w (%s=%s holds no executable initdb and postgres)", ErrNoBinaries, EnvPGBin, pgBin)
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			if b, ok := inDir(strings.TrimSpace(string(out))); ok {
				return b, nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, dir := range dirs {
		if b, ok := inDir(dir); ok {
			return b, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return Binaries{Initdb: initdb, Postgres: postgres}, nil
	}
	return Binaries{}, ErrNoBinaries
}

func inDir(dir string) (Binaries, bool) {
	b := Binaries{Initdb: filepath.Join(dir, "initdb"), Postgres: filepath.Join(dir, "postgres")}
	return b, isExecutable(b.Initdb) && isExecutable(b.Postgres)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// compareVersions orders the versions that name PostgreSQL's directories:
// 16, or 9.6 before PostgreSQL 10. One that is not a number counts as 0.
func compareVersions(a, b string) int {
	x, _ := strconv.ParseFloat(a, 64)
	y, _ := strconv.ParseFloat(b, 64)
	return cmp.Compare(x, y)
}
