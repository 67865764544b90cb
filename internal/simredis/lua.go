package simredis

import (
	"strconv"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// luaRunner runs scripts for one store on one gopher-lua interpreter,
// made once and kept: building an interpreter per call, as miniredis
// does, was two thirds of the simulation's CPU time. Scripts are compiled
// once per body for every master (compileLua). KEYS and ARGV are new
// tables on each call; the engine's scripts keep their state in locals,
// so nothing else carries over from one call to the next.
//
// The conversions follow Redis's (scripts see RESP2 replies): an integer
// becomes a number, a bulk string a string, nil false, an array a table,
// a status {ok = ...}, an error {err = ...}, raised by redis.call and
// returned by redis.pcall; and back, a number is truncated to an
// integer, true is 1, false and nil are nil, a table with ok or err is a
// status or an error, and any other table an array up to its first nil.
type luaRunner struct {
	L *lua.LState
	s *store
	// compileFailed is set by run when the body did not compile, so that
	// EVAL does not keep it.
	compileFailed bool
}

func newLuaRunner(s *store) *luaRunner {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("tostring", L.NewFunction(luaToString))
	r := &luaRunner{L: L, s: s}
	redis := L.NewTable()
	L.SetField(redis, "call", L.NewFunction(func(L *lua.LState) int { return r.call(L, true) }))
	L.SetField(redis, "pcall", L.NewFunction(func(L *lua.LState) int { return r.call(L, false) }))
	L.SetField(redis, "error_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		t.RawSetString("err", lua.LString(L.CheckString(1)))
		L.Push(t)
		return 1
	}))
	L.SetField(redis, "status_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		t.RawSetString("ok", lua.LString(L.CheckString(1)))
		L.Push(t)
		return 1
	}))
	L.SetField(redis, "sha1hex", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(sha1Hex(L.CheckString(1))))
		return 1
	}))
	L.SetField(redis, "log", L.NewFunction(func(*lua.LState) int { return 0 }))
	L.SetGlobal("redis", redis)
	return r
}

// luaToString is tostring as Redis's Lua 5.1 has it: a number is
// written with "%.14g" (LUA_NUMBER_FMT), so a clock in microseconds
// (16 digits) loses its last two, 1796560175187641 becoming
// "1.7965601751876e+15"; gopher-lua writes an integral number whole. A
// script that answers such a number as text must fail here as it does on
// Redis. (Concatenation, which gopher-lua formats in its VM, still
// writes it whole.)
func luaToString(L *lua.LState) int {
	if n, ok := L.Get(1).(lua.LNumber); ok {
		L.Push(lua.LString(luaNumberText(float64(n))))
		return 1
	}
	L.Push(L.ToStringMeta(L.CheckAny(1)))
	return 1
}

// luaNumberText is n as Lua 5.1's lua_number2str writes it.
func luaNumberText(n float64) string { return strconv.FormatFloat(n, 'g', 14, 64) }

// protos caches compiled scripts by body, for every master: a
// FunctionProto does not change once compiled.
var protos sync.Map

func compileLua(body string) (*lua.FunctionProto, error) {
	if p, ok := protos.Load(body); ok {
		return p.(*lua.FunctionProto), nil
	}
	chunk, err := parse.Parse(strings.NewReader(body), "user_script")
	if err != nil {
		return nil, err
	}
	p, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return nil, err
	}
	protos.Store(body, p)
	return p, nil
}

// run runs body with keys and args, and returns its reply.
func (r *luaRunner) run(body string, keys, args []string) reply {
	r.compileFailed = false
	proto, err := compileLua(body)
	if err != nil {
		r.compileFailed = true
		return errorReply("ERR Error compiling script (new function): " + err.Error())
	}
	L := r.L
	defer L.SetTop(0)
	L.SetGlobal("KEYS", stringTable(L, keys))
	L.SetGlobal("ARGV", stringTable(L, args))
	L.Push(L.NewFunctionFromProto(proto))
	if err := L.PCall(0, 1, nil); err != nil {
		if ae, ok := err.(*lua.ApiError); ok {
			if t, ok := ae.Object.(*lua.LTable); ok {
				if e, ok := t.RawGetString("err").(lua.LString); ok {
					return errorReply(string(e))
				}
			}
			return errorReply("ERR " + ae.Object.String())
		}
		return errorReply("ERR " + err.Error())
	}
	return fromLua(L.Get(-1))
}

func stringTable(L *lua.LState, ss []string) *lua.LTable {
	t := L.CreateTable(len(ss), 0)
	for i, s := range ss {
		t.RawSetInt(i+1, lua.LString(s))
	}
	return t
}

// call is redis.call (raise) and redis.pcall.
func (r *luaRunner) call(L *lua.LState, raise bool) int {
	n := L.GetTop()
	if n == 0 {
		L.RaiseError("Please specify at least one argument for this redis lib call")
	}
	args := make([]string, n)
	for i := range n {
		switch v := L.Get(i + 1).(type) {
		case lua.LString:
			args[i] = string(v)
		case lua.LNumber:
			// Redis's Lua turns numbers into strings with %.14g.
			args[i] = strconv.FormatFloat(float64(v), 'g', 14, 64)
		default:
			L.RaiseError("Lua redis lib command arguments must be strings or integers")
		}
	}
	args[0] = strings.ToUpper(args[0])
	var rep reply
	switch {
	case !scriptable(args[0]):
		rep = errorReply("ERR This Redis command is not allowed from script")
	case r.s.crossSlot(args):
		rep = errorReply("ERR Script attempted to access keys that do not hash to the same slot")
	case r.s.nonLocal != nil && r.s.nonLocal(args):
		rep = errorReply("ERR Script attempted to access a non local key in a cluster node script")
	default:
		rep = r.s.exec(args)
	}
	if rep.kind == rError {
		t := L.NewTable()
		t.RawSetString("err", lua.LString(rep.str))
		if raise {
			L.Error(t, 1)
		}
		L.Push(t)
		return 1
	}
	L.Push(toLua(L, rep))
	return 1
}

// toLua converts a reply for a script (see luaRunner).
func toLua(L *lua.LState, r reply) lua.LValue {
	switch r.kind {
	case rInt:
		return lua.LNumber(r.num)
	case rBulk:
		return lua.LString(r.str)
	case rStatus:
		t := L.NewTable()
		t.RawSetString("ok", lua.LString(r.str))
		return t
	case rError:
		t := L.NewTable()
		t.RawSetString("err", lua.LString(r.str))
		return t
	case rArray, rMap, rPush:
		t := L.CreateTable(len(r.elems), 0)
		for i, e := range r.elems {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	}
	return lua.LFalse
}

// fromLua converts a script's result into its reply (see luaRunner).
func fromLua(v lua.LValue) reply {
	switch v := v.(type) {
	case lua.LNumber:
		return intReply(int64(v))
	case lua.LString:
		return bulkReply(string(v))
	case lua.LBool:
		if v {
			return intReply(1)
		}
		return nilReply
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return errorReply(string(e))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return statusReply(string(s))
		}
		var out []reply
		for i := 1; ; i++ {
			e := v.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			out = append(out, fromLua(e))
		}
		return arrayReply(out)
	}
	return nilReply
}
