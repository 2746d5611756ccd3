"""Definition 2, the data model (verify/claims/data_model.py) through its declared structure."""

CID = "data-model"


def test_data_model_draws_and_the_off_by_one_labels(declared):
    """60 hypothesis-drawn batches (quick); the off-by-one labels are far from g(x_t)."""
    d = declared(CID)
    assert len(d.inputs.cases) == 60
    v = d.verdict("labels y_i = g(x_t_i)", d.broken("labels read"))
    assert v.measured > 0.1 and v.rounding < 1e-4


def test_data_model_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()
