// loadclient: the benchmarks' load client, compiled so that it is never what limits a
// measurement. It reads one JSON object on standard input:
//
//	{"url": "http://127.0.0.1:8000/teams/1", "method": "GET", "headers": {...},
//	 "body": "", "requests": 600, "connections": 4, "ok": [200],
//	 "connection_headers": [{...}, ...], "seconds": 0}
//
// With "seconds" above 0 the run lasts that long instead (a round of fixed length: no
// connection starts a request after it) and "requests" is ignored.
//
// Connection i also sends connection_headers[i % len] (each its own signed-in session,
// say; its ":url", if any, replaces the URL for that connection), and "{n}" in the URL
// or the body is replaced by the request's number (a name new on every request).
//
// opens exactly `connections` keep-alive connections (one per worker, each kept for the
// whole run), sends `requests` requests over them (the workers take the next request as
// they finish one) and prints one JSON object: the median and 99th-percentile latency
// (request written to body read), requests a second over the run's wall time, the
// failures (statuses not in `ok`, or transport errors), how many connections were
// opened (equal to `connections` when every one was kept alive) and the CPU this
// process spent (user + system), so that a run shows the client's cost beside the
// server's.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type spec struct {
	URL         string              `json:"url"`
	Method      string              `json:"method"`
	Headers     map[string]string   `json:"headers"`
	Body        string              `json:"body"`
	Requests    int                 `json:"requests"`
	Connections int                 `json:"connections"`
	OK          []int               `json:"ok"`
	PerConn     []map[string]string `json:"connection_headers"`
	Seconds     float64             `json:"seconds"`
}

type result struct {
	Requests   int            `json:"requests"`
	P50Ms      float64        `json:"p50_ms"`
	P99Ms      float64        `json:"p99_ms"`
	RPS        float64        `json:"rps"`
	WallS      float64        `json:"wall_s"`
	Failures   int            `json:"failures"`
	Statuses   map[string]int `json:"statuses"`
	Opened     int64          `json:"connections_opened"`
	ClientCPUS float64        `json:"client_cpu_s"`
	FirstError string         `json:"first_error,omitempty"`
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	seconds := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return seconds(usage.Utime) + seconds(usage.Stime)
}

func main() {
	var s spec
	if err := json.NewDecoder(os.Stdin).Decode(&s); err != nil {
		fmt.Fprintln(os.Stderr, "loadclient: the request on standard input is not JSON:", err)
		os.Exit(2)
	}
	if s.Method == "" {
		s.Method = http.MethodGet
	}
	if s.Connections < 1 || (s.Requests < 1 && s.Seconds <= 0) || s.URL == "" {
		fmt.Fprintln(os.Stderr, "loadclient: give url, requests >= 1 (or seconds > 0) and connections >= 1")
		os.Exit(2)
	}
	ok := map[int]bool{}
	for _, status := range s.OK {
		ok[status] = true
	}
	if len(ok) == 0 {
		ok[200] = true
	}
	var opened atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if !info.Reused {
			opened.Add(1)
		}
	}}
	var next atomic.Int64
	// Each worker's latencies and statuses (0: a transport error), merged at the end.
	latencies := make([][]time.Duration, s.Connections)
	statuses := make([][]int, s.Connections)
	var firstError atomic.Value
	cpuBefore := cpuSeconds()
	started := time.Now()
	deadline := started.Add(time.Duration(s.Seconds * float64(time.Second)))
	var wg sync.WaitGroup
	for w := 0; w < s.Connections; w++ {
		headers := map[string]string{}
		for name, value := range s.Headers {
			headers[name] = value
		}
		target := s.URL
		if len(s.PerConn) > 0 {
			for name, value := range s.PerConn[w%len(s.PerConn)] {
				headers[name] = value
			}
		}
		if own, found := headers[":url"]; found {
			target = own
			delete(headers, ":url")
		}
		numbered := strings.Contains(target, "{n}") || strings.Contains(s.Body, "{n}")
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			// One connection per worker, kept alive for the whole run.
			client := &http.Client{
				Timeout: 60 * time.Second,
				// A redirect is the answer measured (a form's 303), never followed.
				CheckRedirect: func(*http.Request, []*http.Request) error {
					return http.ErrUseLastResponse
				},
				Transport: &http.Transport{
					MaxConnsPerHost:     1,
					MaxIdleConnsPerHost: 1,
					DisableCompression:  true,
					IdleConnTimeout:     90 * time.Second,
				},
			}
			for {
				if s.Seconds > 0 && !time.Now().Before(deadline) {
					return
				}
				n := int(next.Add(1)) - 1
				if s.Seconds <= 0 && n >= s.Requests {
					return
				}
				url, body := target, s.Body
				if numbered {
					url = strings.ReplaceAll(url, "{n}", strconv.Itoa(n))
					body = strings.ReplaceAll(body, "{n}", strconv.Itoa(n))
				}
				request, err := http.NewRequest(s.Method, url, bytes.NewBufferString(body))
				if err != nil {
					fmt.Fprintln(os.Stderr, "loadclient:", err)
					os.Exit(2)
				}
				for name, value := range headers {
					request.Header.Set(name, value)
				}
				request = request.WithContext(httptrace.WithClientTrace(request.Context(), trace))
				begun := time.Now()
				response, err := client.Do(request)
				status := 0
				if err == nil {
					_, err = io.Copy(io.Discard, response.Body)
					response.Body.Close()
					status = response.StatusCode
				}
				latencies[w] = append(latencies[w], time.Since(begun))
				statuses[w] = append(statuses[w], status)
				if err != nil {
					firstError.CompareAndSwap(nil, err.Error())
				}
			}
		}(w)
	}
	wg.Wait()
	wall := time.Since(started).Seconds()
	var all []time.Duration
	var codes []int
	for w := range latencies {
		all = append(all, latencies[w]...)
		codes = append(codes, statuses[w]...)
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "loadclient: no request finished")
		os.Exit(1)
	}
	out := result{
		Requests:   len(all),
		WallS:      wall,
		RPS:        float64(len(all)) / wall,
		Statuses:   map[string]int{},
		Opened:     opened.Load(),
		ClientCPUS: cpuSeconds() - cpuBefore,
	}
	for _, status := range codes {
		out.Statuses[strconv.Itoa(status)]++
		if !ok[status] {
			out.Failures++
		}
	}
	if e, found := firstError.Load().(string); found {
		out.FirstError = e
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	out.P50Ms = ms(all[len(all)/2])
	if len(all)%2 == 0 {
		out.P50Ms = (ms(all[len(all)/2-1]) + ms(all[len(all)/2])) / 2
	}
	out.P99Ms = ms(all[int(0.99*float64(len(all)-1))])
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
