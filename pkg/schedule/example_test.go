package schedule_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/schedule"
)

// Example adds a weekday-morning schedule in a time zone, pauses it and
// lists the schedules.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, _ := os.MkdirTemp("", "lovia-example")
	defer os.RemoveAll(dir)
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1}) // in-process only
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	nc, err := srv.Connect()
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := bus.Provision(ctx, js, bus.ProvisionConfig{}); err != nil {
		panic(err)
	}

	m, err := schedule.New(schedule.Config{JS: js})
	if err != nil {
		panic(err)
	}
	_, err = m.Add(ctx, schedule.Schedule{
		Name: "standup", Agent: "support", Input: "Summarise yesterday's tickets",
		Cron: "0 30 9 * * 1-5", TimeZone: "Europe/Paris",
	})
	if err != nil {
		panic(err)
	}
	if _, err := m.Pause(ctx, "standup"); err != nil {
		panic(err)
	}
	list, _ := m.List(ctx)
	for _, s := range list {
		fmt.Println(s.Name, s.Agent, s.Pattern(), s.TimeZone, "paused:", s.Paused)
	}

	_, err = m.Add(ctx, schedule.Schedule{Name: "standup", Agent: "support", Input: "again", Cron: "@daily"})
	fmt.Println(bus.ErrorFor(err).Hint)
	// Output:
	// standup support 0 30 9 * * 1-5 Europe/Paris paused: true
	// remove it first (`lovia schedule rm standup`) or pick another name
}
