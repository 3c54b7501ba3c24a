package contracts_test

import (
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// TestNinthContract verifies a contract of another domain (a clinic
// rescheduling an appointment) with its own sources, fact types and attrs:
// no Go code knows about it.
func TestNinthContract(t *testing.T) {
	const newSlot = "2026-12-01T09:30:00Z"
	world := func() contracts.Input {
		return contracts.Input{
			Action: act("r1", "reschedule_appointment", "front_desk_bot", "appointment:ap_7", 0, attrs{"new_slot": newSlot}),
			Facts: []commitlayer.Fact{
				fact("scheduling", "appointment_booked", "appointment:ap_7", "sch-1", -48*time.Hour,
					attrs{"status": "booked", "slot": "2026-11-30T15:00:00Z", "clinician": "dr_lee"}, "patient:pt_3"),
				fact("messaging", "sms_sent", "patient:pt_3", "msg-0", -47*time.Hour, attrs{"body": "Booked for 2026-11-30"}),
				fact("scheduling", "appointment_moved", "appointment:ap_7", "sch-2", time.Minute,
					attrs{"from_slot": "2026-11-30T15:00:00Z", "to_slot": newSlot, "clinician": "dr_lee"}),
				// The text goes to the patient, linked from the booking.
				fact("messaging", "sms_sent", "patient:pt_3", "msg-1", 2*time.Minute, attrs{"body": "Moved to 2026-12-01 09:30"}),
				// Another patient's appointment of the same clinician.
				fact("scheduling", "appointment_booked", "appointment:ap_8", "sch-3", -48*time.Hour, attrs{"status": "booked"}, "patient:pt_4"),
				fact("scheduling", "appointment_cancelled", "appointment:ap_8", "sch-4", time.Minute, attrs{}),
			},
			Coverage: connected("scheduling", "messaging"),
			Now:      t0.Add(time.Hour),
		}
	}
	priorMove := func(in *contracts.Input, id string, off time.Duration) {
		in.Prior = append(in.Prior, act(id, "reschedule_appointment", "patient_portal", "appointment:ap_7", off, attrs{"new_slot": "x"}))
		in.Facts = append(in.Facts, fact("scheduling", "appointment_moved", "appointment:ap_7", "sch-"+id, off+time.Second,
			attrs{"from_slot": "a", "to_slot": "x", "clinician": "dr_lee"}))
	}
	runSandboxCasesFrom(t, "testdata/reschedule_appointment.yaml", []sandboxCase{
		{"moved and texted", world, P, P, nil},
		{"already cancelled", func() contracts.Input {
			in := world()
			in.Facts = append(in.Facts, fact("scheduling", "appointment_cancelled", "appointment:ap_7", "sch-5", -time.Hour, attrs{"status": "cancelled"}))
			return in
		}, P, F, []string{"policy_violation booked"}},
		{"too little notice", func() contracts.Input {
			in := world()
			in.Action.Params["new_slot"] = "2026-11-29T11:00:00Z"
			in.Facts[2].Attrs["to_slot"] = "2026-11-29T11:00:00Z"
			in.Facts[3].Attrs["body"] = "Moved to 2026-11-29 11:00"
			return in
		}, P, F, []string{"policy_violation notice"}},
		{"moved to another clinician", func() contracts.Input {
			in := world()
			in.Facts[2].Attrs["clinician"] = "dr_kim"
			return in
		}, F, P, []string{"effect_differs rescheduled"}},
		{"patient not told", func() contracts.Input {
			in := world()
			in.Facts = without(in.Facts, "msg-1")
			return in
		}, F, P, []string{"missing_effect patient_texted"}},
		{"moved back the next day", func() contracts.Input {
			in := world()
			in.Facts = append(in.Facts, fact("scheduling", "appointment_moved", "appointment:ap_7", "sch-6", 20*time.Hour,
				attrs{"from_slot": newSlot, "to_slot": "2026-11-30T15:00:00Z", "clinician": "dr_lee"}))
			return in
		}, F, P, []string{"duplicate_effect rescheduled", "effect_differs rescheduled", "effect_reversed rescheduled"}},
		{"third move this week", func() contracts.Input {
			in := world()
			priorMove(&in, "m1", -5*24*time.Hour)
			priorMove(&in, "m2", -2*24*time.Hour)
			return in
		}, P, F, []string{"limit_exceeded reschedules_per_week"}},
		{"messaging down", func() contracts.Input {
			in := world()
			in.Facts = without(in.Facts, "msg-1")
			in.Coverage.Unreachable = map[string]string{"messaging": "503"}
			return in
		}, U, P, []string{"source_unavailable patient_texted"}},
	})
}
