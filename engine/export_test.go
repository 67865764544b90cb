package engine

import (
	"time"

	"github.com/redlock-bench/redlock/internal/mutation"
)

// GateWaiting exposes the gate's queue length to the tests.
func (l *Locker) GateWaiting(resource string) int {
	if l.gate == nil {
		return 0
	}
	return l.gate.waiting(resource)
}

// SkipHandoffEndCheck turns off, for the tests that prove the lifecycle
// checks can fail, the rule that a lease that ended is never handed on.
func SkipHandoffEndCheck(skip bool) { mutation.HandOffEndedLease.Set(skip) }

// FenceKey is the internal key of a lock key's fencing counter.
func FenceKey(key string) string { return fencePrefix + key }

// QuitScriptBody is the Lua a waiter that gives up runs on every master.
var QuitScriptBody = quitScript.Body

// FenceScriptSHA is the SHA of the script a fence round runs on one key.
var FenceScriptSHA = fenceScript.SHA

// FenceAllScriptSHA is the SHA of the fence round's script on several keys.
var FenceAllScriptSHA = allKeysForm[fenceScript].SHA

// RWFenceScriptSHA is the SHA of the fence round's script for a writer.
var RWFenceScriptSHA = rwFenceScript.SHA

// UndoScriptBody is the Lua that cleans up after a failed attempt.
var UndoScriptBody = undoScript.Body

// RoundSpan is the longest a round of the Locker's can go on counting
// votes: its node timeout, plus the watchdog's period that notices it.
func (l *Locker) RoundSpan() time.Duration { return l.roundSpan() }

// SetListBatch makes Walk ask SCAN for n keys a call, and call pending
// with the number of keys and names it holds each time that grows. Set
// before the Locker's first Walk.
func (l *Locker) SetListBatch(n int, pending func(int)) { l.listBatch, l.listPending = n, pending }

// SetListScan makes Walk take master m's SCAN answer keys as scan(m,
// keys) instead, as a master that repeats keys would answer. Set before
// the Locker's first Walk.
func (l *Locker) SetListScan(scan func(m int, keys []string) []string) { l.listScan = scan }

// SetListAsk makes Walk's question to master j, which of a batch's
// names it holds, fail with ask(j) when that is not nil. Set before the
// Locker's first Walk.
func (l *Locker) SetListAsk(ask func(j int) error) { l.listAsk = ask }
