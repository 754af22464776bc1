//! Shared rank-metric vectors (`testdata/rank_metric_vectors.json`), also read by pytest.

use ragmeter_core::batch::{compute, Batch, Metric};

#[test]
fn batch_engine_matches_shared_vectors() {
    let text = include_str!("../../../testdata/rank_metric_vectors.json");
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let grades: Vec<f64> = case["grades"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let mut ideal: Vec<f64> = case["ideal"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        ideal.sort_by(|a, b| b.partial_cmp(a).unwrap());
        let k = case["k"].as_u64().unwrap();
        let n_rel = [case["n_relevant"].as_f64().unwrap()];
        let offsets = [0, grades.len()];
        let ideal_offsets = [0, ideal.len()];
        let batch = Batch { offsets: &offsets, grades: &grades, num_relevant: &n_rel, ideal_offsets: Some(&ideal_offsets), ideal_grades: Some(&ideal) };
        for (key, want) in case["expected"].as_object().unwrap() {
            let metric = Metric::parse(&format!("{key}@{k}")).unwrap();
            let got = compute(&batch, &[metric], 1.0).unwrap()[0];
            let want = want.as_f64().unwrap();
            assert!((got - want).abs() < 1e-12, "{name}: {key}@{k} = {got}, want {want}");
        }
    }
}
