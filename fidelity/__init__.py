"""Estimator fidelity harness: estimate ÷ real tokens, per content class and per transcript."""
