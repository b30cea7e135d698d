import { Field } from './ui.jsx';

// The shares of one GPU the forms offer; '' is whole GPUs.
const FRACTIONS = [
  ['', 'whole GPUs'],
  ['125', '1/8 of a GPU'],
  ['250', '1/4 of a GPU'],
  ['500', '1/2 of a GPU'],
];

// "GPUs" and "or a fraction", as the job and session forms ask for them: a fraction means one GPU.
// `aria` and `fieldError` are the form's own, so that the server's error shows on the field it
// names.
export function GpuAmountFields({
  gpus,
  fraction,
  onGpus,
  onFraction,
  aria,
  fieldError,
  placeholder,
  testId,
}) {
  return (
    <>
      <Field label="GPUs">
        <input
          name="gpus"
          type="number"
          min="0"
          step="1"
          class="short"
          data-testid={testId}
          value={fraction ? '1' : gpus}
          disabled={!!fraction}
          onInput={onGpus}
          placeholder={placeholder}
          {...aria('gpus')}
        />
        {fieldError('gpus')}
      </Field>
      <Field label="or a fraction">
        <select
          name="gpu_fraction"
          value={fraction}
          onChange={onFraction}
          {...aria('gpu_fraction')}
        >
          {FRACTIONS.map(([v, label]) => (
            <option value={v}>{label}</option>
          ))}
        </select>
        {fieldError('gpu_fraction')}
      </Field>
    </>
  );
}
