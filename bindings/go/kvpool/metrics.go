package kvpool

import "errors"

// MetricsText is the pool's counters and sizes in the Prometheus text
// exposition format (version 0.0.4), ready to serve on a /metrics endpoint
// with the content type "text/plain; version=0.0.4" (kvpool_metrics_text in
// metrics.h; docs/services.md lists every family). It reads the pool and
// changes nothing.
func (p *Pool) MetricsText() (string, error) {
	buf := make([]byte, 16<<10)
	for {
		var n uint
		err := p.call(func(h SwigcptrKvpool) error { return Kvpool_metrics_text(h, buf, &n) })
		if err == nil {
			return string(buf[:n]), nil
		}
		// Too small: the library told the length; counters may grow before the next call.
		if !errors.Is(err, ErrBufferTooSmall) || int(n) < len(buf) {
			return "", err
		}
		buf = make([]byte, int(n)+1024)
	}
}
