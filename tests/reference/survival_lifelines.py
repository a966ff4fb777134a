"""Reference figures for src/analytics/survival.rs, from Python lifelines.

Builds a deterministic data set of 2,000 part lifetimes in 3 groups, writes it to
survival_subjects.csv (the fixture the Rust test reads with include_str!), reads it back and prints
lifelines' Kaplan-Meier estimates (survival, log(-log) band, median and its interval) and the
multivariate log-rank test. The printed values are pasted into
`analytics::survival::tests::matches_lifelines_reference`; CI does not run Python.

Regenerate (only if the data set or the figures need to change):

    python3 -m venv /tmp/ll && /tmp/ll/bin/pip install lifelines
    /tmp/ll/bin/python tests/reference/survival_lifelines.py

Figures in the Rust test came from lifelines 0.30.3, numpy 2.4.6, pandas 2.3.3, scipy 1.17.1.
"""

import csv
import os

import numpy as np
from lifelines import KaplanMeierFitter, __version__ as lifelines_version
from lifelines.statistics import logrank_test, multivariate_logrank_test
from lifelines.utils import median_survival_times

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "survival_subjects.csv")

# Three groups of parts (say three vendors), Weibull lifetimes in days with different scales,
# administrative censoring uniform over 0-900 days (parts still in service at the end of the data).
# Durations are rounded to 0.1 day so that there are tied times, including events tied with
# censorings.
rng = np.random.default_rng(20240611)
SIZES = (700, 650, 650)
SCALES = (420.0, 520.0, 900.0)
SHAPE = 1.3
rows = []
for g, (n, scale) in enumerate(zip(SIZES, SCALES)):
    life = scale * rng.weibull(SHAPE, n)
    censor = rng.uniform(0.0, 900.0, n)
    duration = np.round(np.minimum(life, censor), 1)
    event = (life <= censor).astype(int)
    rows.extend((g, float(d), int(e)) for d, e in zip(duration, event))

with open(CSV, "w", newline="") as f:
    f.write("group,duration,event\n")
    for g, d, e in rows:
        f.write(f"{g},{d!r},{e}\n")

# Read back exactly what the Rust test reads (Python's float() rounds correctly, as Rust's parse does).
with open(CSV) as f:
    data = [(int(r["group"]), float(r["duration"]), int(r["event"])) for r in csv.DictReader(f)]
G = np.array([r[0] for r in data])
T = np.array([r[1] for r in data])
E = np.array([r[2] for r in data])

print(f"# lifelines {lifelines_version}; {len(T)} subjects, {E.sum()} events, "
      f"{len(T) - len(np.unique(T))} tied durations")

TIMES = [0.0, 30.0, 100.0, 182.5, 365.0, 500.0, 730.0, float(T.max()) + 10.0]


def km(label, durations, events, alpha):
    kmf = KaplanMeierFitter(alpha=alpha).fit(durations, events, label=label)
    s = kmf.survival_function_at_times(TIMES).values
    ci = kmf.confidence_interval_.asof(TIMES).values
    med = median_survival_times(kmf.confidence_interval_)
    median = kmf.median_survival_time_
    lower, upper = float(med.iloc[0, 0]), float(med.iloc[0, 1])
    print(f"// {label}, confidence {1 - alpha}: (t, survival, lower, upper); median (estimate, lower, upper)")
    for t, sv, (lo, hi) in zip(TIMES, s, ci):
        print(f"({t!r}, {float(sv)!r}, {float(lo)!r}, {float(hi)!r}),")
    print(f"median: ({float(median)!r}, {lower!r}, {upper!r})")


km("all", T, E, 0.05)
for g in range(3):
    km(f"group {g}", T[G == g], E[G == g], 0.05)
km("group 0 at 90%", T[G == 0], E[G == 0], 0.10)
# Group 1 as if observation had stopped at 380 days: the median is reached, its upper bound is not.
km("group 1 censored at 380 days", np.minimum(T[G == 1], 380.0), E[G == 1] * (T[G == 1] <= 380.0), 0.05)

r = multivariate_logrank_test(T, G, E)
print(f"// multivariate log-rank, 3 groups: statistic, p-value, df {r.degrees_of_freedom}")
print(f"({float(r.test_statistic)!r}, {float(r.p_value)!r})")
r = logrank_test(T[G == 0], T[G == 1], E[G == 0], E[G == 1])
print("// log-rank, group 0 vs group 1: statistic, p-value")
print(f"({float(r.test_statistic)!r}, {float(r.p_value)!r})")
