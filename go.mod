module github.com/redlock-bench/redlock

go 1.25.0

require (
	github.com/redis/rueidis v1.0.79
	github.com/yuin/gopher-lua v1.1.1
	pgregory.net/rapid v1.3.0
)

require golang.org/x/sys v0.47.0 // indirect
