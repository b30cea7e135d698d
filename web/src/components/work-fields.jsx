// The fields the job form (pages/work.jsx) and the session form (sessions-panel.jsx) share: what
// the work asks for, and where it counts. `bind` is the form's own (binder in form-fields.jsx), so
// that the server's error shows on the field it names.
import { InputField, SelectField } from './ui.jsx';

// The shares of one GPU the forms offer; '' is whole GPUs.
const FRACTIONS = [
  ['', 'whole GPUs'],
  ['125', '1/8 of a GPU'],
  ['250', '1/4 of a GPU'],
  ['500', '1/2 of a GPU'],
];

// "GPUs" and "or a fraction": a fraction means one GPU.
export function GpuAmountFields({ bind, placeholder, testId }) {
  const gpus = bind('gpus');
  const fraction = bind('gpu_fraction');
  return (
    <>
      <NumberField
        {...gpus}
        label="GPUs"
        step="1"
        data-testid={testId}
        value={fraction.value ? '1' : gpus.value}
        disabled={!!fraction.value}
        placeholder={placeholder}
      />
      <SelectField {...fraction} label="or a fraction" options={FRACTIONS} />
    </>
  );
}

// What the fields ask for, in the API's terms; a count that is not a whole number goes as typed,
// so that the server names the field in its answer.
export function gpuAmount(gpus, fraction) {
  if (fraction) return { gpus: 1, gpu_milli: Number(fraction) };
  if (gpus !== '') return { gpus: /^\d+$/.test(gpus.trim()) ? Number(gpus) : gpus };
  return {};
}

// A short number field, from 0 unless `min` says otherwise.
export function NumberField(props) {
  return <InputField type="number" min="0" class="short" {...props} />;
}

// "CPU cores"; `props` bind it and may say more (a placeholder).
export function CpuField(props) {
  return <NumberField label="CPU cores" step="0.25" {...props} />;
}

// The team the work counts against, offered where there is a choice: several teams, or a platform
// admin (any team). `value` is the form's effective team.
export function TeamField({ bind, value, teams, admin }) {
  if (teams.length < 2 && !admin) return null;
  return <SelectField {...bind('team')} label="Team" value={value} options={teams} />;
}

// The team's project, or none.
export function ProjectField({ bind, projects }) {
  return (
    <SelectField
      {...bind('project')}
      label="Project"
      options={[['', '(none)'], ...projects.map((p) => p.name)]}
    />
  );
}
