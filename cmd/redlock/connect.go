package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redlock-bench/redlock/cmd/internal/connflags"
	"github.com/redlock-bench/redlock/engine"
	"github.com/spf13/pflag"
)

// How every command reaches the masters: --masters (or $REDLOCK_MASTERS)
// and the connection flags, parsed alike, and their failures said alike,
// each message starting with the command's name.

// mastersFlags are the flags that say where the masters are and how to
// reach them.
type mastersFlags struct {
	fs      *pflag.FlagSet
	masters *string
	conn    *connflags.Flags
}

// masterOptions are mastersFlags parsed.
type masterOptions struct {
	masters     []string
	conn        connflags.Settings
	authWarning string // printed before anything else (see connflags.Flags.Warning)
	passFrom    string // where the password came from: "-a/--pass", "REDISCLI_AUTH" or ""
}

// registerMasters adds --masters to fs; registerConn the connection
// flags, which commands list after their own.
func registerMasters(fs *pflag.FlagSet) *mastersFlags {
	return &mastersFlags{fs: fs, masters: fs.String("masters", "",
		"comma-separated host:port of the independent Redis masters (default $REDLOCK_MASTERS)")}
}

func (f *mastersFlags) registerConn() { f.conn = connflags.Register(f.fs) }

// parse reads the flags of command cmd ("exec", "status", ...).
func (f *mastersFlags) parse(cmd string) (masterOptions, error) {
	var o masterOptions
	list, from := *f.masters, "--masters"
	if !f.fs.Changed("masters") {
		list, from = os.Getenv("REDLOCK_MASTERS"), "REDLOCK_MASTERS"
		if strings.TrimSpace(list) == "" {
			return o, usageErrorf("%s: no masters: give --masters host:port,... or set REDLOCK_MASTERS", cmd)
		}
	}
	var err error
	if o.masters, err = engine.ParseMasters(list); err != nil {
		return o, usageErrorf("%s: %s: %v", cmd, from, err)
	}
	if o.conn, err = f.conn.Settings(true); err != nil {
		return o, usageErrorf("%s: %v", cmd, err)
	}
	o.authWarning = f.conn.Warning()
	switch {
	case f.fs.Changed("pass"):
		o.passFrom = "-a/--pass"
	case o.conn.Password != "":
		o.passFrom = connflags.EnvPassword
	}
	return o, nil
}

// parseFlags parses args into fs for command cmd; it reports false after
// printing --help (usage's %s is the flags).
func parseFlags(fs *pflag.FlagSet, cmd, usage string, args []string, stdout io.Writer) (bool, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, usage, fs.FlagUsages())
			return false, nil
		}
		// pflag quotes no argument: one with a line break would split
		// the message.
		msg := strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(err.Error())
		return false, usageErrorf("%s: %s (see 'redlock %s --help')", cmd, msg, cmd)
	}
	return true, nil
}

// connect validates cfg and connects to its masters for command cmd:
// unreachable masters are 69 (with the fix for a credential or TLS
// mistake), masters unusable as configured 78.
func connect(ctx context.Context, cmd string, o masterOptions, cfg engine.Config) (*engine.Locker, error) {
	cfg.Conn.Username, cfg.Conn.Password, cfg.Conn.TLS = o.conn.Username, o.conn.Password, o.conn.TLS
	if err := cfg.Validate(); err != nil {
		return nil, usageErrorf("%s: %s", cmd, engineText(err))
	}
	l, err := engine.New(ctx, cfg)
	if err == nil {
		return l, nil
	}
	switch {
	case errors.Is(err, engine.ErrUnreachable):
		msg := engineText(err)
		if fix := connectionFix(msg, o.conn.Username, o.passFrom); fix != "" {
			msg += "; " + fix
		}
		return nil, statusErrorf(exitUnavailable, "%s: %s", cmd, msg)
	case ctx.Err() != nil:
		return nil, err
	}
	return nil, statusErrorf(exitConfig, "%s: masters cannot be used: %s", cmd, engineText(err))
}
