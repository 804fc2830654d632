"""benchmarks.pbt_study: the two programs differ only in the pbt fields, agents are scored
one by one, and the verdict reads the intervals."""

from benchmarks import pbt_study


def test_the_programs_differ_only_in_pbt():
    study = pbt_study.STUDIES["pendulum"]
    sweep = pbt_study.command(study, "sweep", 1, 2, 1.0, "w")
    pbt = pbt_study.command(study, "pbt", 1, 2, 1.0, "w")
    assert pbt[:len(sweep)] == sweep
    assert all(a.startswith("--config.pbt.") for a in pbt[len(sweep):])
    assert "--config.seed=100" in sweep and "--config.total_env_steps=204800" in sweep


def test_each_agent_is_a_record():
    rows = [{"learning_rate": lr, "seed": s, "env_steps": 10 * i,
             "episode_return": float(i) + lr} for i in range(1, 11) for lr in (1, 2)
            for s in (0, 1)]
    recs = pbt_study.agent_records("pendulum", "sweep", 0, rows)
    assert [(r["learning_rate"], r["seed"]) for r in recs] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert recs[0]["score"] == 10.5 and recs[0]["env_steps"] == 100  # lines 9, 10: 10, 11


def test_verdict_reads_the_intervals():
    best = (10.0, 9.0, 11.0)
    assert "beat" in pbt_study.verdict(best, (12.0, 11.5, 13.0), 1e-3)
    assert "overlap: not a clear win" in pbt_study.verdict(best, (10.5, 9.5, 12.0), 1e-3)
    assert "did worse" in pbt_study.verdict(best, (7.0, 6.0, 8.0), 1e-3)
    assert "did not beat" in pbt_study.verdict(best, (9.5, 8.5, 10.5), 1e-3)
