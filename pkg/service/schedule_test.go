package service_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/schedule"
	"github.com/lovia-fleet/lovia/pkg/service"
)

// TestScheduleEndpoints: <p>.api.schedule.* adds, lists, pauses, resumes
// and removes schedules; bad bodies and missing schedules get error
// replies with a hint.
func TestScheduleEndpoints(t *testing.T) {
	t.Parallel()
	nc := serveAPI(t)
	names, _ := bus.NewNames("")
	call := func(op bus.ScheduleOp, body string) (*nats.Msg, *bus.ErrorReply) {
		t.Helper()
		msg, err := nc.Request(names.ScheduleAPI(op), []byte(body), 10*time.Second)
		require.NoError(t, err)
		if msg.Header.Get(bus.HeaderServiceError) == "" {
			return msg, nil
		}
		var er bus.ErrorReply
		require.NoError(t, json.Unmarshal(msg.Data, &er))
		require.NotEmpty(t, er.Error.Hint, "every error reply has a hint: %+v", er.Error)
		return msg, &er
	}

	// An agent the fleet does not know is refused as a submit is.
	_, er := call(bus.OpScheduleAdd, `{"name":"daily","agent":"oracel","input":"hi","every":"1m"}`)
	require.NotNil(t, er)
	require.Equal(t, bus.TypeUnknownAgent, er.Error.Type)
	require.Equal(t, `unknown agent "oracel"`, er.Error.Message)
	require.Equal(t, "use one of the agents the fleet serves: oracle; or start a worker whose agents file defines oracel", er.Error.Hint)

	msg, er := call(bus.OpScheduleAdd, `{"name":"daily","agent":"oracle","input":"hi","cron":"0 0 8 * * *","time_zone":"Europe/Paris"}`)
	require.Nil(t, er)
	var got schedule.Schedule
	require.NoError(t, json.Unmarshal(msg.Data, &got))
	require.Equal(t, "0 0 8 * * *", got.Cron)

	_, er = call(bus.OpScheduleAdd, `{"name":"tick","agent":"oracle","input":"hi","every":"1m"}`)
	require.Nil(t, er)
	msg, er = call(bus.OpSchedulePause, `{"name":"tick"}`)
	require.Nil(t, er)
	require.NoError(t, json.Unmarshal(msg.Data, &got))
	require.True(t, got.Paused)

	msg, er = call(bus.OpScheduleList, ``)
	require.Nil(t, er)
	var list service.ScheduleList
	require.NoError(t, json.Unmarshal(msg.Data, &list))
	require.Len(t, list.Schedules, 2)
	require.Equal(t, "daily", list.Schedules[0].Name)
	require.Equal(t, schedule.Duration(time.Minute), list.Schedules[1].Every)
	require.True(t, list.Schedules[1].Paused)

	_, er = call(bus.OpScheduleResume, `{"name":"tick"}`)
	require.Nil(t, er)
	_, er = call(bus.OpScheduleRemove, `{"name":"tick"}`)
	require.Nil(t, er)
	_, er = call(bus.OpScheduleGet, `{"name":"tick"}`)
	require.Equal(t, bus.TypeNotFound, er.Error.Type)

	for body, want := range map[string]string{
		`{"name":"x","agent":"demo","input":"hi","every":"1m","colour":"red"}`: "colour",
		`{"name":"x","agent":"demo","input":"hi","every":"soon"}`:              "every",
		`{"name":"x","agent":"demo","input":"hi"}`:                             "exactly one",
		`{"name":"x","agent":"demo","input":"hi","cron":"30 9 * * *"}`:         "6",
		`not json`: "decode",
	} {
		_, er := call(bus.OpScheduleAdd, body)
		require.NotNil(t, er, body)
		require.Equal(t, bus.TypeInvalidRequest, er.Error.Type, body)
		require.Contains(t, er.Error.Message, want, body)
	}
	_, er = call(bus.OpScheduleRemove, `{}`)
	require.Contains(t, er.Error.Message, "name")
}
