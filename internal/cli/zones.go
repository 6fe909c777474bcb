package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/resource"
)

// printZones prints the zones of a global control plane with the state of
// their sync streams (GET /zones/{name}/_insight).
func printZones(ctx context.Context, env Env, c *client.Client, zones []*resource.Object, wide bool) error {
	tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
	header := []string{"NAME", "ENABLED", "STATUS", "LAST SEEN", "SENT", "ACKED", "RECEIVED", "RESOURCES OUT/IN", "BYTES OUT/IN", "REFUSED"}
	if wide {
		header = append(header, "INSTANCE", "VERSION", "LAST ERROR")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	now := env.Now()
	for _, z := range zones {
		enabled := z.Spec.(*resource.ZoneSpec).Enabled
		in, err := c.ZoneInsight(ctx, z.Name)
		if err != nil {
			return err
		}
		row := []string{z.Name, strconv.FormatBool(enabled == nil || *enabled), status(in), since(now, in.LastSeen),
			strconv.FormatInt(in.Sent.Revision, 10), strconv.FormatInt(in.Sent.Acked, 10), strconv.FormatInt(in.Received.Revision, 10),
			fmt.Sprintf("%d/%d", in.Sent.Resources, in.Received.Resources),
			fmt.Sprintf("%s/%s", bytesOf(in.Sent.Bytes), bytesOf(in.Received.Bytes)),
			strconv.FormatInt(in.Refused, 10)}
		if wide {
			row = append(row, orNone(in.Instance), orNone(in.Version), orNone(firstLine(in.LastError)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func status(in *api.ZoneInsight) string {
	if in.Online {
		return "online"
	}
	return "offline"
}

func since(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return age(now.Sub(t)) + " ago"
}

func bytesOf(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
