"""The answer for one stack (lab/report/advice.py) as plain text for a terminal: what `lab doctor --advise` and
`lab report --stack` print without --json. Words only; every figure comes from the typed Advice."""

from __future__ import annotations

from lab.stack.exposure import Happens
from lab.report.advice import Advice, Fix, FixKind, Kept, LockAnswer, StoreAnswer
from lab.report.declared import Declared
from lab.decision.strength import bound_text

SHOWN_FIXES = 3  # lock alternatives shown in text; --json has every one


def _runs(run: str) -> str:
    names = run.split(" + ")
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} runs merged with it"


def _stack_lines(advice: Advice) -> list[str]:
    out = [f"Services described: {', '.join(advice.services) or 'none'}."]
    lock = advice.stack.get("lock")
    out.append(f"Lock in use: {lock if isinstance(lock, str) else 'none' if lock is None else 'unknown'}.")
    if advice.unknown_facts:
        out.append("Unknown facts (a fault that depends on one is counted as possible; set them in the stack file):")
        out += [f"  - {name}: {why}" for name, why in advice.unknown_facts]
    if advice.left_out:
        out.append(f"Left out: {len(advice.left_out)} locks need a service this stack does not describe "
                   f"({', '.join(advice.left_out[:6])}{', ...' if len(advice.left_out) > 6 else ''}).")
    return out


def _exposure_lines(advice: Advice) -> list[str]:
    out = [f"Faults this stack is exposed to ({len(advice.exposed)}; {len(advice.ruled_out)} more cannot happen "
           "to it, by their columns' declarations):"]
    for e in advice.exposed:
        may = f" (may: {'; '.join(e.unknown)})" if e.happens is Happens.UNKNOWN else ""
        out.append(f"  - {e.label}{may}")
    if advice.ruled_out:
        out.append("Cannot happen to it: " + "; ".join(f"{r.label} ({r.because})" for r in advice.ruled_out) + ".")
    lab_declared = sum(1 for e in advice.exposed if e.declared is Declared.LAB)
    if lab_declared:
        out.append(f"({lab_declared} of these columns' stacks come from this lab's declarations: the run recorded "
                   "none.)")
    if advice.undeclared:
        out.append(f"({advice.undeclared} columns declare no stacks, in the run or in this lab: taken to happen to "
                   "every stack.)")
    return out


def _kept_line(k: Kept) -> str:
    weakest = (f"weakest ✓ {k.weakest} (n={k.weakest_n}, {bound_text(k.bound or 1.0)}{'' if k.strong else ', weak'})"
               if k.weakest else "no ✓")
    extra = ""
    if k.store:
        extra += f"; the store lost writes whatever the lock under {len(k.store)}"
    if k.unknown:
        extra += f"; unknown under {len(k.unknown)}"
    return (f"    ✓ {k.backend}: kept {k.faults_kept} faults on {k.exercised_trials} exercised trials, {weakest}"
            f"{extra}. Cost {k.cost}.")


def _need_lines(advice: Advice) -> list[str]:
    out = ["For each need, the locks that kept their promise under exactly these faults:"]
    for need in advice.needs:
        out.append(f"  {need.need} ({need.candidates} candidates over {need.faults} faults):")
        out += [_kept_line(k) for k in need.qualifying] or ["    none qualifies"]
        out += [f"    ? {b} is unproven: unknown under {'; '.join(labels)}, which failed another candidate"
                for b, labels in need.unproven]
        out.append(f"    {need.verdict}")
    return out


def _fix_line(fix: Fix) -> str:
    if fix.kind is FixKind.SETTING:
        moved = (f"; it takes away {'; '.join(fix.removes)}" if fix.removes else "") + \
                (f" and brings {'; '.join(fix.adds)}" if fix.adds else "")
        return f"    - setting: {fix.change}{moved}: {fix.evidence}."
    where = "" if fix.same_services else f" ({fix.where})"
    serves = f" serves {len(fix.needs)} of its needs;" if fix.needs else ""
    return f"    - lock: {fix.change}{where}:{serves} {fix.evidence}."


def _lock_lines(lock: LockAnswer | None, note: str | None) -> list[str]:
    if lock is None:
        return [f"The lock in use: {note}."]
    name = lock.backend if lock.row == lock.backend else f"{lock.backend} (row {lock.row})"
    out = []
    if not lock.fails:
        out.append(f"The lock in use, {name}, fails none of the faults this stack is exposed to (kept {lock.kept}"
                   + (f"; unknown under {len(lock.unknown)}" if lock.unknown else "")
                   + (f"; the store lost writes whatever the lock under {len(lock.store)}" if lock.store else "") + ").")
    else:
        out.append(f"The lock in use, {name}, FAILS under {len(lock.fails)} of the faults this stack is exposed to:")
        for f in lock.fails:
            may = f" (may happen: {'; '.join(f.unknown)})" if f.happens is Happens.UNKNOWN else ""
            out.append(f"    ✗ {f.label}: {f.cell.removeprefix('✗ ')}{may}")
        settings = [f for f in lock.fixes if f.kind is FixKind.SETTING]
        locks = [f for f in lock.fixes if f.kind is FixKind.LOCK]
        if not lock.fixes:
            out.append("  No change measured here fixes it: no setting, and no lock this stack can run qualifies.")
        else:
            out.append("  Changes that fix it, smallest first (settings leave the code alone; then the nearest locks):")
            if not settings:
                out.append("    (no setting change alone fixes it)")
            out += [_fix_line(f) for f in settings] + [_fix_line(f) for f in locks[:SHOWN_FIXES]]
            if len(locks) > SHOWN_FIXES:
                out.append(f"    ({len(locks) - SHOWN_FIXES} more locks qualify; --json lists them)")
    if lock.untested:
        out.append(f"  Never exercised (the fault did not take its right away) under {'; '.join(lock.untested)}, "
                   "which failed another lock: no evidence either way there.")
    if lock.note:
        out.append(f"  Note: {lock.note}.")
    return out


def _store_lines(found: list[StoreAnswer] | tuple[StoreAnswer, ...]) -> list[str]:
    if not found:
        return ["Store findings that concern this stack: none measured."]
    out = ["Store findings that concern this stack (no lock keeps these; the fix is the store's configuration):"]
    for s in found:
        may = f" (may concern it: {'; '.join(s.unknown)})" if s.happens is Happens.UNKNOWN else ""
        out.append(f"  ◆ {s.label}{may}: the no-lock control lost an acknowledged write in {s.lost} of {s.n} trials, "
                   f"and {len(s.store)} locks lost one the same way with their promise kept.")
        for m in s.measured_otherwise:
            have = {Happens.YES: "this stack has it", Happens.NO: "this stack has not",
                    Happens.UNKNOWN: "whether this stack has it is unknown"}[m.stack_has_it]
            needs = f" ({'; '.join(m.needs)})" if m.needs else ""
            trials = f"{m.control_trials} trial{'' if m.control_trials == 1 else 's'}"
            control = (f"the control lost an acknowledged write in {m.control_lost} of {trials}" if m.control_lost
                       else f"the control lost none of the {m.control_acknowledged} writes acknowledged in its {trials}"
                       if m.control_acknowledged else f"the control's {trials} had no write acknowledged")
            out.append(f"    measured against it: {m.label}{needs}: {control}; {m.locks_lost} of the {m.locks_ran} "
                       f"locks that ran it lost one; {have}.")
        if not s.measured_otherwise:
            out.append("    no other configuration of this fault was measured.")
    return out


def render(advice: Advice) -> str:
    lines = [f"The answer for this stack, from run {_runs(advice.run)}."]
    if advice.not_the_reference:
        lines.append(f"⚑ Not a reference: {'; '.join(advice.not_the_reference)}; its verdicts cannot be traced to one "
                     "command at one commit.")
    lines.append("")
    lines += _stack_lines(advice) + [""] + _exposure_lines(advice) + [""] + _need_lines(advice) + [""]
    lines += _lock_lines(advice.lock, advice.lock_note) + [""] + _store_lines(advice.store)
    return "\n".join(lines) + "\n"
