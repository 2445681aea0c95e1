"""A HuggingFace BERT state dict as a TensorFlow checkpoint under Google's variable names, as
Google's BERT releases store them (bert/encoder/layer_0/attention/self/query/kernel, kernels
[in, out], LayerNorm gamma/beta, cls/predictions/output_bias, cls/seq_relationship/
output_weights), written by tf.compat.v1's Saver: prefix.index + prefix.data-00000-of-00001.
HF's own converter (convert_bert_pytorch_checkpoint_to_original_tf.py) cannot serve: under
TensorFlow 2 it needs tf.Session, and it never runs its assign ops (it would save zeros), so the
callers check what this writes with HF's TensorFlow loader (load_tf_weights_in_bert) instead.
Used by make_checkpoint_fixtures.py and check_checkpoint_import.sh."""
import numpy as np


def google_name(hf_name):
    """Google's name of an HF tensor (the "bert." prefix kept or added) and whether it is transposed."""
    n = hf_name if hf_name.startswith(("bert.", "cls.")) else "bert." + hf_name
    n = n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
    n = n.replace("layer.", "layer_")
    transpose = False
    if n.endswith("_embeddings.weight"):
        n = n[: -len(".weight")]
    elif n == "cls.predictions.bias":
        n = "cls.predictions.output_bias"
    elif n.startswith("cls.seq_relationship."):
        n = n.replace(".weight", ".output_weights").replace(".bias", ".output_bias")
    elif n.endswith(".weight") and "LayerNorm" not in n:
        n, transpose = n[: -len(".weight")] + ".kernel", True
    return n.replace(".", "/"), transpose


def write_google_checkpoint(state_dict, prefix, optimizer_slots=False):
    """state_dict: HF names -> torch tensors (position_ids and the tied decoder are skipped).
    optimizer_slots: add an adam_m slot to the query kernels and a global_step, as a training
    checkpoint has (a loader must pass over them)."""
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        tf_vars = []
        for k, v in state_dict.items():
            if "position_ids" in k or "predictions.decoder." in k:
                continue
            name, transpose = google_name(k)
            value = np.ascontiguousarray(v.numpy().T if transpose else v.numpy())
            tf_vars.append(tf.compat.v1.get_variable(name, initializer=tf.constant(value)))
            if optimizer_slots and name.endswith("query/kernel"):
                tf_vars.append(tf.compat.v1.get_variable(name + "/adam_m", initializer=tf.zeros_like(value)))
        if optimizer_slots:
            tf_vars.append(tf.compat.v1.get_variable("global_step", initializer=tf.constant(1000, dtype=tf.int64)))
        saver = tf.compat.v1.train.Saver(tf_vars)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False, write_state=False)
